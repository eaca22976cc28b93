/* Linux-PAM's return codes, for the unit test that walks the result table.
   Constants only: nothing here needs libpam at link time. */
#include <security/_pam_types.h>
