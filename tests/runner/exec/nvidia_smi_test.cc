// nvidia-smi's query lines as the driver prints them (nvidia_smi.h).

#include <doctest/doctest.h>

#include "runner/exec/nvidia_smi.h"

using namespace protocol;

TEST_CASE("nvidia-smi: the command queries the fields in order, in loop mode at the interval") {
  CHECK(NvidiaSmiArgv(1.0) ==
        std::vector<std::string>{"nvidia-smi",
                                 "--query-gpu=index,utilization.gpu,memory.used,power.draw,clocks.sm,temperature.gpu",
                                 "--format=csv,noheader,nounits", "-lms", "1000"});
  CHECK(NvidiaSmiArgv(0.25).back() == "250");
  CHECK(NvidiaSmiArgv(0.01).back() == "100");  // at least 0.1 s
}

TEST_CASE("nvidia-smi: a reading line gives its GPU's five quantities, memory in bytes") {
  // An H100's line as nvidia-smi 550 prints it with noheader,nounits.
  auto samples = ParseNvidiaSmiLine("3, 97, 70123, 512.30, 1980, 61");
  REQUIRE(samples);
  REQUIRE(samples->size() == 5);
  for (const TelemetrySample& s : *samples) CHECK(s.device == "gpu3");
  CHECK((*samples)[0].quantity == quantity::kGpuUtilization);
  CHECK((*samples)[0].value == 97);
  CHECK((*samples)[1].quantity == quantity::kGpuMemoryUsed);
  CHECK((*samples)[1].value == 70123.0 * 1024 * 1024);
  CHECK((*samples)[2].quantity == quantity::kGpuPower);
  CHECK((*samples)[2].value == doctest::Approx(512.30));
  CHECK((*samples)[3].quantity == quantity::kGpuSmClock);
  CHECK((*samples)[3].value == 1980);
  CHECK((*samples)[4].quantity == quantity::kGpuTemperature);
  CHECK((*samples)[4].value == 61);
}

TEST_CASE("nvidia-smi: a field the GPU does not report is left out; other lines are not readings") {
  auto samples = ParseNvidiaSmiLine("0, 12, 405, [N/A], 210, [Not Supported]");
  REQUIRE(samples);
  CHECK(samples->size() == 3);
  for (const TelemetrySample& s : *samples) CHECK(s.quantity != quantity::kGpuPower);
  CHECK_FALSE(ParseNvidiaSmiLine(
      "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
      "NVIDIA driver is installed and running."));
  CHECK_FALSE(ParseNvidiaSmiLine(""));
  CHECK_FALSE(ParseNvidiaSmiLine("index, utilization.gpu [%], memory.used [MiB], power.draw [W], clocks.sm [MHz], "
                                 "temperature.gpu"));
  CHECK_FALSE(ParseNvidiaSmiLine("0, 12, 405"));
  CHECK_FALSE(ParseNvidiaSmiLine("x, 12, 405, 60.1, 210, 30"));
}
