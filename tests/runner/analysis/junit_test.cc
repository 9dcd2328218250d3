// JUnit XML: structure checked against the schema's required elements and
// attributes (junit-4.xsd as Jenkins / GitLab read it), escaping, and the
// suites built from a stored run and from a comparison.

#include <doctest/doctest.h>

#include <map>
#include <regex>

#include "regression_fixtures.h"
#include "runner/analysis/compare.h"
#include "runner/analysis/junit.h"
#include "runner/base/text.h"

using namespace protocol;
using namespace protocol::testing;

namespace {

// A parsed element: name, attributes (unescaped entities left as written), children, text.
struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::vector<Element> children;
  std::string text;
  const Element* Child(const std::string& n) const {
    for (const auto& c : children)
      if (c.name == n) return &c;
    return nullptr;
  }
};

// A small well-formedness parser for what RenderJunit writes: elements,
// attributes in double quotes, text, the XML declaration. Fails the test on
// mismatched tags, raw '<' or '&' not starting an entity, or unquoted attributes.
Element ParseXml(const std::string& xml) {
  REQUIRE(StartsWith(xml, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"));
  static const std::regex kTag(R"re(<(/?)([A-Za-z_][-A-Za-z0-9_.]*)((?:\s+[A-Za-z_][-A-Za-z0-9_.]*="[^"<]*")*)\s*(/?)>)re");
  static const std::regex kAttr(R"re(([A-Za-z_][-A-Za-z0-9_.]*)="([^"]*)")re");
  static const std::regex kEntity(R"(&(amp|lt|gt|quot|apos|#[0-9]+);)");
  std::vector<Element> stack(1);
  size_t pos = xml.find("?>") + 2;
  std::smatch m;
  while (pos < xml.size()) {
    size_t lt = xml.find('<', pos);
    std::string text = xml.substr(pos, lt == std::string::npos ? std::string::npos : lt - pos);
    for (size_t amp = text.find('&'); amp != std::string::npos; amp = text.find('&', amp + 1)) {
      std::string rest = text.substr(amp);
      REQUIRE_MESSAGE(std::regex_search(rest, m, kEntity, std::regex_constants::match_continuous),
                      "raw & in text: " << rest);
    }
    stack.back().text += text;
    if (lt == std::string::npos) break;
    std::string rest = xml.substr(lt);
    REQUIRE_MESSAGE(std::regex_search(rest, m, kTag, std::regex_constants::match_continuous),
                    "malformed tag at: " << rest.substr(0, 80));
    Element e;
    e.name = m[2];
    std::string attrs = m[3];
    for (std::sregex_iterator it(attrs.begin(), attrs.end(), kAttr), end; it != end; ++it) {
      std::string value = (*it)[2];
      REQUIRE(value.find('<') == std::string::npos);
      e.attributes[(*it)[1]] = value;
    }
    bool closing = m[1] == "/", empty = m[4] == "/";
    pos = lt + m[0].length();
    if (closing) {
      REQUIRE(stack.size() > 1);
      REQUIRE(stack.back().name == e.name);
      Element done = std::move(stack.back());
      stack.pop_back();
      stack.back().children.push_back(std::move(done));
    } else if (empty) {
      stack.back().children.push_back(std::move(e));
    } else {
      stack.push_back(std::move(e));
    }
  }
  REQUIRE(stack.size() == 1);
  REQUIRE(stack[0].children.size() == 1);
  return stack[0].children[0];
}

// The required elements and attributes of the JUnit schema, and the counts adding up.
void CheckSchema(const Element& root) {
  CHECK(root.name == "testsuites");
  for (const char* a : {"name", "tests", "failures", "errors", "skipped", "time"})
    CHECK_MESSAGE(root.attributes.count(a), "testsuites lacks " << a);
  int tests = 0;
  for (const Element& suite : root.children) {
    REQUIRE(suite.name == "testsuite");
    for (const char* a : {"name", "tests", "failures", "errors", "skipped", "time"})
      CHECK_MESSAGE(suite.attributes.count(a), "testsuite lacks " << a);
    int cases = 0, failures = 0, errors = 0, skipped = 0;
    for (const Element& c : suite.children) {
      if (c.name == "properties") {
        for (const Element& p : c.children) {
          CHECK(p.name == "property");
          CHECK(p.attributes.count("name"));
          CHECK(p.attributes.count("value"));
        }
        continue;
      }
      REQUIRE(c.name == "testcase");
      ++cases;
      for (const char* a : {"classname", "name", "time"})
        CHECK_MESSAGE(c.attributes.count(a), "testcase lacks " << a);
      if (const Element* f = c.Child("failure")) {
        ++failures;
        CHECK(f->attributes.count("message"));
        CHECK(f->attributes.count("type"));
      }
      if (const Element* e = c.Child("error")) {
        ++errors;
        CHECK(e->attributes.count("message"));
        CHECK(e->attributes.count("type"));
      }
      if (c.Child("skipped")) ++skipped;
    }
    CHECK(suite.attributes.at("tests") == std::to_string(cases));
    CHECK(suite.attributes.at("failures") == std::to_string(failures));
    CHECK(suite.attributes.at("errors") == std::to_string(errors));
    CHECK(suite.attributes.at("skipped") == std::to_string(skipped));
    tests += cases;
  }
  CHECK(root.attributes.at("tests") == std::to_string(tests));
}

}  // namespace

TEST_CASE("junit: escaping of markup, quotes, control characters and bad UTF-8") {
  CHECK(XmlEscape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&apos;");
  CHECK(XmlEscape("line1\nline2\t") == "line1&#10;line2&#9;");
  CHECK(XmlEscape(std::string("bell\x07") + "\xff") == "bell\uFFFD\uFFFD");
  CHECK(XmlEscape("2.1.1.1 \u2192 ok") == "2.1.1.1 \u2192 ok");
}

TEST_CASE("junit: a hand-built document has every required element and attribute") {
  JunitSuite suite;
  suite.name = "s <1>";
  suite.timestamp = "2024-05-01T00:00:00Z";
  suite.properties = {{"plan_sha256", "abc"}};
  auto make = [](const char* name, double time) {
    JunitCase c;
    c.classname = "protocol.p.stage1";
    c.name = name;
    c.time = time;
    return c;
  };
  JunitCase pass = make("2.1.1.1", 1.5);
  JunitCase fail = make("2.1.1.2", 2);
  fail.outcome = JunitCase::Outcome::kFailure;
  fail.type = "failed";
  fail.message = "exit code 1: \"boom\" & <oom>";
  fail.text = "details";
  JunitCase skip = make("2.1.1.3", 0);
  skip.outcome = JunitCase::Outcome::kSkipped;
  skip.message = "not run";
  suite.cases = {pass, fail, skip};
  std::string xml = RenderJunit("protocol", {suite});
  Element root = ParseXml(xml);
  CheckSchema(root);
  CHECK(root.attributes["tests"] == "3");
  CHECK(root.attributes["time"] == "3.500");
  const Element& s = root.children[0];
  CHECK(s.attributes.at("name") == "s &lt;1&gt;");
  CHECK(s.attributes.at("timestamp") == "2024-05-01T00:00:00Z");
  CHECK(s.children[2].Child("failure")->attributes.at("message") ==
        "exit code 1: &quot;boom&quot; &amp; &lt;oom&gt;");
  CHECK(s.children[3].Child("skipped")->attributes.at("message") == "not run");
}

TEST_CASE("junit: a stored run gives one testcase per (case, repeat) with failures and reasons") {
  auto store = OpenStore(":memory:");
  REQUIRE(store.ok());
  LoadRunsFixture(**store, "nightly.json");
  auto suite = JunitSuiteForRun(**store, 3, {{"2.1.2.1", "wall time 1.5 min is 10 % below ..."}});
  REQUIRE(suite.ok());
  Element root = ParseXml(RenderJunit("protocol", {suite.value()}));
  CheckSchema(root);
  const Element& s = root.children[0];
  CHECK(s.attributes.at("name") == "protocol run 3 (nightly)");
  CHECK(s.attributes.at("tests") == "9");  // 5 + 3 + 1 rows
  CHECK(s.attributes.at("failures") == "6");  // 5 reference failures + 1 failed case
  const Element* failed = nullptr;
  for (const Element& c : s.children)
    if (c.attributes.count("name") && c.attributes.at("name") == "2.2.2.1") failed = &c;
  REQUIRE(failed != nullptr);
  CHECK(failed->attributes.at("classname") == "protocol.nightly.stage2");
  CHECK(failed->attributes.at("time") == "5.000");
  CHECK(failed->Child("failure")->attributes.at("type") == "failed");
  CHECK(failed->Child("failure")->attributes.at("message") == "exit code 1 (CUDA out of memory)");
  CHECK(s.children[1].attributes.at("name") == "2.1.2.1 repeat 1");
  CHECK(s.children[1].Child("failure")->attributes.at("type") == "reference");
}

TEST_CASE("junit: a comparison fails regressed cases and skips incomparable ones") {
  auto store = OpenStore(":memory:");
  REQUIRE(store.ok());
  LoadRunsFixture(**store, "nightly.json");
  auto b = CollectCompareSide(**store, 1);
  auto c = CollectCompareSide(**store, 2);
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  CompareReport report = CompareRuns(*b, *c, CompareOptions{});
  Element root = ParseXml(RenderJunit("protocol compare", {JunitSuiteForCompare(report)}));
  CheckSchema(root);
  const Element& s = root.children[0];
  CHECK(s.attributes.at("failures") == "1");
  CHECK(s.attributes.at("skipped") == "1");
  const Element& regressed = s.children[1];
  CHECK(regressed.attributes.at("name") == "2.1.2.1");
  CHECK(regressed.Child("failure")->attributes.at("type") == "regression");
  CHECK(regressed.Child("failure")->attributes.at("message") ==
        "wall_seconds 12 % worse (100 s \u2192 112 s, threshold 5 %)");
  CHECK(s.children[3].Child("skipped")->attributes.at("message") ==
        "incomparable: different topology: rig0:4x2 vs rig0:2x4");
}

TEST_CASE("junit: `protocol compare --junit` writes the file and still exits 1 on a regression") {
  TempDir dir;
  std::string db = (dir.path / "r.db").string();
  {
    auto store = OpenStore(db);
    REQUIRE(store.ok());
    LoadRunsFixture(**store, "nightly.json");
  }
  std::string xml_path = (dir.path / "out" / "compare.xml").string();
  Output out = Protocol({"compare", "1", "2", "--db", db, "--junit", xml_path}, dir.path);
  CHECK(out.exit_code == 1);
  Element root = ParseXml(ReadText(xml_path));
  CheckSchema(root);
  CHECK(root.attributes["failures"] == "1");
}
