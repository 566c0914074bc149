package replay

// Fates is what became of a replay's confirmed items, as far as anyone
// can tell: CameBack died again and were captured (the re-dead stop
// condition counts them); Settled reached their terminal state, by the
// policy's outcome query; Unknown are neither: nothing watched them reach
// it (no outcome query) or its answer is still to come, and they did not
// come back. A run's watch window passing with Unknown items is no proof
// they succeeded, only that they did not die again within it.
type Fates struct {
	Confirmed int `json:"confirmed"`
	CameBack  int `json:"came_back"`
	Settled   int `json:"settled"`
	Unknown   int `json:"unknown"`
}

// fatesOf sums up confirmed items of which cameBack came back and settled
// reached their terminal state. A job that died again after the outcome
// query saw it terminal counts once, as come back.
func fatesOf(confirmed, cameBack, settled int) Fates {
	cameBack = min(cameBack, confirmed)
	settled = min(settled, confirmed-cameBack)
	return Fates{Confirmed: confirmed, CameBack: cameBack, Settled: settled, Unknown: confirmed - cameBack - settled}
}
