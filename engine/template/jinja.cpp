#include "engine/template/jinja.h"
