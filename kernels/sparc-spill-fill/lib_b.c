/* sparc-spill-fill: routine B ("library" B), calls A one level deeper. */
#include "spill_fill.h"

long spill_b(long depth)
{
    if (depth <= 1)
        return 1;
    return 1 + spill_a(depth - 1);
}
