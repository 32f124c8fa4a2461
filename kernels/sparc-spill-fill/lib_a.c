/* sparc-spill-fill: routine A ("library" A), calls B one level deeper. */
#include "spill_fill.h"

long spill_a(long depth)
{
    if (depth <= 1)
        return 1;
    return 1 + spill_b(depth - 1);
}
