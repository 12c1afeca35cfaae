#include "sprintnet/dist/stall_detector.h"

#include "sprintnet/core/error.h"

namespace sprintnet::dist {

void StallDetector::recorded(double now) {
  // The clock starts with the first mark after an idle spell: time with nothing pending is not
  // waiting.
  if (pending_ == 0) since_ = now;
  ++pending_;
}

void StallDetector::passed(double now) {
  SN_CHECK(pending_ > 0, "a mark passed with none pending");
  --pending_;
  since_ = now;
}

double StallDetector::idle_s(double now) const { return pending_ == 0 ? 0.0 : now - since_; }

}  // namespace sprintnet::dist
