#ifndef CLIBYAML_SHIM_H
#define CLIBYAML_SHIM_H
/* libyaml (Debian's libyaml-dev), the YAML parser under YAMLDocument. */
#include <yaml.h>
#endif
