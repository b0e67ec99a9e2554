package backend

// Slot is slot, for the external tests that compare it with a Cluster's.
var Slot = slot
