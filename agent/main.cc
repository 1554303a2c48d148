// kvwatch: the command line. Subcommands are defined in their own files under
// agent/; this file only dispatches.
#include <cstdio>

#include "agent/version.h"

int main(int argc, char** argv) {
  std::printf("kvwatch %s (%s)\n", kvwatch::Version(), kvwatch::Revision());
  return 0;
}
