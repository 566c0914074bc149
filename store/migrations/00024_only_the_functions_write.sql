-- +goose Up
-- Only the schema's own functions write its tables. No group holds a write
-- privilege on them, but a member of pg_write_all_data (or a login granted
-- one by hand) would write past every rule: set replayed letters back to
-- dead, insert a request with a false item count. Row security binds such
-- a writer and spares the functions: they run as the tables' owner, which
-- row security does not bind (it is not FORCEd), while any other login
-- meets one policy per table that lets it read and nothing else, so its
-- INSERT is refused and its UPDATE and DELETE find no row. pg_write_all_data
-- carries no TRUNCATE. A new table gets the same (TestOnlyTheFunctionsWrite).
SET LOCAL search_path TO pg_catalog, pg_temp;

ALTER TABLE expiryctl.dead_letters ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.dead_letters FOR SELECT USING (true);
ALTER TABLE expiryctl.dead_letter_states ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.dead_letter_states FOR SELECT USING (true);
ALTER TABLE expiryctl.dead_letter_tallies ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.dead_letter_tallies FOR SELECT USING (true);
ALTER TABLE expiryctl.dead_letter_class_tallies ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.dead_letter_class_tallies FOR SELECT USING (true);
ALTER TABLE expiryctl.dead_letter_due_tallies ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.dead_letter_due_tallies FOR SELECT USING (true);
ALTER TABLE expiryctl.dead_letter_arrival_tallies ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.dead_letter_arrival_tallies FOR SELECT USING (true);
ALTER TABLE expiryctl.replay_requests ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.replay_requests FOR SELECT USING (true);
ALTER TABLE expiryctl.replay_items ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.replay_items FOR SELECT USING (true);
ALTER TABLE expiryctl.replay_outcomes ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.replay_outcomes FOR SELECT USING (true);
ALTER TABLE expiryctl.replay_runner_leases ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.replay_runner_leases FOR SELECT USING (true);
ALTER TABLE expiryctl.policy ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.policy FOR SELECT USING (true);
ALTER TABLE expiryctl.policy_changes ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.policy_changes FOR SELECT USING (true);
ALTER TABLE expiryctl.audit_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.audit_log FOR SELECT USING (true);
ALTER TABLE expiryctl.audit_trail ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.audit_trail FOR SELECT USING (true);
ALTER TABLE expiryctl.audit_tree ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.audit_tree FOR SELECT USING (true);
ALTER TABLE expiryctl.audit_checkpoints ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.audit_checkpoints FOR SELECT USING (true);
ALTER TABLE expiryctl.audit_chain ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.audit_chain FOR SELECT USING (true);
ALTER TABLE expiryctl.schema_definitions ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.schema_definitions FOR SELECT USING (true);
ALTER TABLE expiryctl.schema_definitions_before ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.schema_definitions_before FOR SELECT USING (true);
ALTER TABLE expiryctl.schema_version ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON expiryctl.schema_version FOR SELECT USING (true);

-- +goose Down
SET LOCAL search_path TO pg_catalog, pg_temp;
DROP POLICY reads ON expiryctl.schema_version;
ALTER TABLE expiryctl.schema_version DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.schema_definitions_before;
ALTER TABLE expiryctl.schema_definitions_before DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.schema_definitions;
ALTER TABLE expiryctl.schema_definitions DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.audit_chain;
ALTER TABLE expiryctl.audit_chain DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.audit_checkpoints;
ALTER TABLE expiryctl.audit_checkpoints DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.audit_tree;
ALTER TABLE expiryctl.audit_tree DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.audit_trail;
ALTER TABLE expiryctl.audit_trail DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.audit_log;
ALTER TABLE expiryctl.audit_log DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.policy_changes;
ALTER TABLE expiryctl.policy_changes DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.policy;
ALTER TABLE expiryctl.policy DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.replay_runner_leases;
ALTER TABLE expiryctl.replay_runner_leases DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.replay_outcomes;
ALTER TABLE expiryctl.replay_outcomes DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.replay_items;
ALTER TABLE expiryctl.replay_items DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.replay_requests;
ALTER TABLE expiryctl.replay_requests DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.dead_letter_arrival_tallies;
ALTER TABLE expiryctl.dead_letter_arrival_tallies DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.dead_letter_due_tallies;
ALTER TABLE expiryctl.dead_letter_due_tallies DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.dead_letter_class_tallies;
ALTER TABLE expiryctl.dead_letter_class_tallies DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.dead_letter_tallies;
ALTER TABLE expiryctl.dead_letter_tallies DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.dead_letter_states;
ALTER TABLE expiryctl.dead_letter_states DISABLE ROW LEVEL SECURITY;
DROP POLICY reads ON expiryctl.dead_letters;
ALTER TABLE expiryctl.dead_letters DISABLE ROW LEVEL SECURITY;
