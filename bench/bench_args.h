#ifndef PROTOCOL_BENCH_BENCH_ARGS_H_
#define PROTOCOL_BENCH_BENCH_ARGS_H_

// The benchmarks' command lines: `--flag value` and `--switch` arguments, read
// in order. A flag whose value is missing ends the program with exit code 2
// and "<flag> needs a value".
//
//   for (BenchArgs args(argc, argv); args.Next();) {
//     if (args.flag() == "--steps") steps = std::stoll(args.Value());
//     else ...
//   }

#include <cstdio>
#include <cstdlib>
#include <string>

class BenchArgs {
 public:
  // Reads argv[first..argc).
  BenchArgs(int argc, char** argv, int first = 1) : argc_(argc), argv_(argv), next_(first) {}
  // Moves to the next argument; false when there is none.
  bool Next() {
    if (next_ >= argc_) return false;
    flag_ = argv_[next_++];
    return true;
  }
  const std::string& flag() const { return flag_; }
  // The argument after the flag.
  std::string Value() {
    if (next_ >= argc_) {
      std::fprintf(stderr, "%s needs a value\n", flag_.c_str());
      std::exit(2);
    }
    return argv_[next_++];
  }

 private:
  int argc_;
  char** argv_;
  int next_;
  std::string flag_;
};

#endif  // PROTOCOL_BENCH_BENCH_ARGS_H_
