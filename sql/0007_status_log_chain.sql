-- rewardctl schema v7: the status log's index covers the chain. reconcile's status_log check reads
-- the whole log in (entity, entity_id, id) order with both states; with the states in the index
-- that is one ordered index scan (PostgreSQL: index-only) instead of a sort or a table lookup per
-- row. It replaces status_log_entity, whose columns are its prefix, so a log write still maintains
-- one index of this kind.
--@postgres CREATE INDEX status_log_chain ON status_log (entity, entity_id, id) INCLUDE (from_state, to_state);
--@sqlite CREATE INDEX status_log_chain ON status_log (entity, entity_id, id, from_state, to_state);
DROP INDEX status_log_entity;
