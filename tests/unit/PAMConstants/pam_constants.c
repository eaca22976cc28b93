/* Header-only module: the return codes are macros (see pam_constants.h). */
#include "pam_constants.h"
