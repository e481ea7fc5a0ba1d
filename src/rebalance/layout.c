/*
 * layout.c — distribute's placement arithmetic (dht-layout.c) compiled
 * into brickfs-rebalance, so that the process places files exactly as
 * the clients do.
 */
#include "xlators/cluster/distribute/dht-layout.c"
