/*
 * dht-layout.c — distribute's placement arithmetic (the translator's
 * dht-layout.c) compiled once for the test programs, which all link
 * every C file of tests/lib: test_dht_hash checks it, the distribute graph tests
 * (dht-graph.c) use it to know where a name hashes. Nothing here lives
 * beyond the calls.
 */
#include "xlators/cluster/distribute/dht-layout.c"
