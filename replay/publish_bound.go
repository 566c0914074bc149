package replay

// PublishBound is how many times the runs of one request may publish an
// item: a replay is at least once, and at most PublishBound times per
// approval (per request, however often it is approved again). Each publish
// is cleared in the database first (replay_items_send, which counts it in
// the item's sends), so the bound holds however the runs end and whoever
// calls the schema's functions; an item whose runs were all spent without a
// recorded broker answer fails when the next run starts, and only a new
// request sends its letter again. The database holds the number
// (replay_publish_bound); this is the same one, for what expiryctl says.
const PublishBound = 3
