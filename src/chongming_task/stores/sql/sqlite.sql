-- SQL of SqliteTaskStore, in named sections (loaded by stores/_sqlfile.py).
--
-- Conventions shared with postgres.sql (same section names, same parameter names):
-- * instants used for ordering are INTEGER microseconds since the Unix epoch (UTC);
-- * `doc` is the codec's JSON of the whole snapshot, the only thing a read decodes;
-- * the side-channel columns (progress, heartbeat_at, lease_owner, lease_until, pid,
--   checkpoint_gaps) are written by both save and touch and override the same fields
--   of `doc` on read, so touch never rewrites the document and never moves
--   status_version;
-- * the other columns are copies of snapshot fields that queries filter or sort on.
-- Parameters are always bound (:name); no value is ever spliced into the text.

-- name: migrate_1
CREATE TABLE ct_meta (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO ct_meta (key, value) VALUES ('commands_rev', 0);

CREATE TABLE ct_tasks (
    seq INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    status_version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    bucket INTEGER,
    owner TEXT,
    meta_schedule TEXT,
    meta_pipeline TEXT,
    tags TEXT NOT NULL,
    progress TEXT,
    heartbeat_at TEXT,
    lease_owner TEXT,
    lease_until TEXT,
    pid INTEGER,
    doc TEXT NOT NULL
);

CREATE INDEX ct_tasks_status_created ON ct_tasks (status, created_at, seq);
CREATE INDEX ct_tasks_created ON ct_tasks (created_at, seq);
CREATE INDEX ct_tasks_updated ON ct_tasks (updated_at, seq);
CREATE INDEX ct_tasks_priority ON ct_tasks (priority DESC, created_at, seq);
CREATE INDEX ct_tasks_name ON ct_tasks (name, created_at, seq);
CREATE INDEX ct_tasks_bucket ON ct_tasks (bucket, created_at, seq) WHERE bucket IS NOT NULL;
CREATE INDEX ct_tasks_owner ON ct_tasks (owner, created_at, seq) WHERE owner IS NOT NULL;
CREATE INDEX ct_tasks_schedule ON ct_tasks (meta_schedule, created_at, seq)
    WHERE meta_schedule IS NOT NULL;
CREATE INDEX ct_tasks_pipeline ON ct_tasks (meta_pipeline, created_at, seq)
    WHERE meta_pipeline IS NOT NULL;

-- Tags are mirrored from ct_tasks.tags (a sorted JSON array) by triggers, so every
-- write path keeps them consistent inside its own transaction.
CREATE TABLE ct_task_tags (
    tag TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (tag, seq)
) WITHOUT ROWID;

CREATE INDEX ct_task_tags_seq ON ct_task_tags (seq);

CREATE TRIGGER ct_tasks_tags_insert AFTER INSERT ON ct_tasks WHEN new.tags <> '[]'
BEGIN
    INSERT OR IGNORE INTO ct_task_tags (tag, seq) SELECT value, new.seq FROM json_each(new.tags);
END;

CREATE TRIGGER ct_tasks_tags_update AFTER UPDATE OF tags ON ct_tasks
WHEN old.tags IS NOT new.tags
BEGIN
    DELETE FROM ct_task_tags WHERE seq = old.seq;
    INSERT OR IGNORE INTO ct_task_tags (tag, seq) SELECT value, new.seq FROM json_each(new.tags);
END;

CREATE TRIGGER ct_tasks_tags_delete AFTER DELETE ON ct_tasks WHEN old.tags <> '[]'
BEGIN
    DELETE FROM ct_task_tags WHERE seq = old.seq;
END;

CREATE TABLE ct_transitions (
    task_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    doc TEXT NOT NULL,
    PRIMARY KEY (task_id, version)
) WITHOUT ROWID;

CREATE TABLE ct_commands (
    seq INTEGER PRIMARY KEY,
    command_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    action TEXT NOT NULL,
    target_owner TEXT,
    status TEXT NOT NULL,
    claimed_by TEXT,
    claim_token TEXT,
    lease_until INTEGER,
    claims INTEGER NOT NULL,
    completed_at INTEGER,
    result TEXT,
    doc TEXT NOT NULL
);

CREATE INDEX ct_commands_status ON ct_commands (status, seq);

-- commands_rev changes whenever a command becomes claimable by someone new; waiters in
-- other processes poll this one row instead of the commands table.
CREATE TRIGGER ct_commands_rev_insert AFTER INSERT ON ct_commands
BEGIN
    UPDATE ct_meta SET value = value + 1 WHERE key = 'commands_rev';
END;

CREATE TRIGGER ct_commands_rev_release AFTER UPDATE OF status ON ct_commands
WHEN new.status = 'pending'
BEGIN
    UPDATE ct_meta SET value = value + 1 WHERE key = 'commands_rev';
END;

-- name: migrate_2
-- Version 2 adds the scheduler's control records and firing claims.
CREATE TABLE ct_schedules (
    name TEXT PRIMARY KEY,
    revision INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    data TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE ct_firings (
    schedule TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    owner TEXT NOT NULL,
    task_id TEXT NOT NULL,
    claimed_at INTEGER NOT NULL,
    PRIMARY KEY (schedule, scheduled_at)
) WITHOUT ROWID;

CREATE INDEX ct_firings_scheduled_at ON ct_firings (scheduled_at);

-- name: migrate_3
-- Version 3: claim commands by action through an index (see claim_commands_actions).
CREATE INDEX IF NOT EXISTS ct_commands_action ON ct_commands (status, action, seq);

-- name: migrate_4
-- Version 4: commands are claimed highest priority first, then oldest (seq). A worker
-- submission's priority is its payload's integer "priority" (Command.claim_priority);
-- every other command has 0. Rows written before version 4 that can still be claimed
-- (pending or claimed) get theirs from the payload here, clamped to 64 bits like
-- claim_priority; completed ones keep 0 (never claimed again, and skipping them keeps
-- the migration short on a long command history). Every statement may run again on a
-- migrated file: the store skips an ADD COLUMN whose column exists (SQLite has no
-- ADD COLUMN IF NOT EXISTS) and the backfill recomputes the same values.
ALTER TABLE ct_commands ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;

UPDATE ct_commands SET priority = CASE
    WHEN json_type(doc, '$.payload.priority') = 'integer'
    THEN max(min(json_extract(doc, '$.payload.priority'), 9223372036854775807),
             -9223372036854775808)
    ELSE 0 END
WHERE kind = 'task' AND action = 'submit' AND status IN ('pending', 'claimed');

-- The claim by action reads (action, priority DESC, seq) over the claimable rows only:
-- a claim of one action (a worker's) walks it in claim order and stops at its limit,
-- whatever the backlog, and one of several (a poller's) searches only its actions. It
-- replaces the version-3 index on (status, action, seq).
DROP INDEX IF EXISTS ct_commands_action;
CREATE INDEX IF NOT EXISTS ct_commands_claim ON ct_commands (action, priority DESC, seq)
    WHERE status IN ('pending', 'claimed');

-- name: migrate_5
-- Version 5: the work queue (docs/queue.md). Queued unheld tasks (status 'queued', no
-- owner) are claimed highest priority first, oldest first, through a partial index,
-- and workers register themselves (id, host, pid, buckets, slots, heartbeat) in
-- ct_workers. Every statement may run again on a migrated file.
CREATE INDEX IF NOT EXISTS ct_tasks_claimable ON ct_tasks (priority DESC, created_at, seq)
    WHERE status = 'queued' AND owner IS NULL;

CREATE TABLE IF NOT EXISTS ct_workers (
    worker_id TEXT PRIMARY KEY,
    heartbeat_at INTEGER NOT NULL,
    doc TEXT NOT NULL
) WITHOUT ROWID;

-- name: migrate_6
-- Version 6: the gaps between a task's checkpoints (docs/explain.md), a side-channel
-- column like progress: written by save and touch, never moving status_version. The
-- store skips the ADD COLUMN on a file that has the column already.
ALTER TABLE ct_tasks ADD COLUMN checkpoint_gaps TEXT;

-- name: migrate_7
-- Version 7: global limits (docs/queue.md, "Limits across workers"). One row per
-- holder of a slot of a named limit. A row counts while its lease_until (renewed with
-- the task's lease) has not passed, so a dead holder's slot frees itself. Every
-- statement may run again on a migrated file.
CREATE TABLE IF NOT EXISTS ct_slots (
    name TEXT NOT NULL,
    task_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    acquired_at INTEGER NOT NULL,
    lease_until INTEGER NOT NULL,
    PRIMARY KEY (name, task_id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS ct_slots_task ON ct_slots (task_id);

-- name: migrate_8
-- Version 8: unique work (docs/queue.md, "Unique work"). A task created with a unique
-- key keeps it in unique_key (NULL for every other task and for every row written
-- before this version, so existing rows are kept as they are). At most one unfinished
-- task per key: the partial unique index is the store's constraint. The finished tasks
-- of a key (the unique_for window) are found through ct_tasks_unique_key. The store
-- skips the ADD COLUMN on a file that has the column already.
ALTER TABLE ct_tasks ADD COLUMN unique_key TEXT;

CREATE UNIQUE INDEX IF NOT EXISTS ct_tasks_unique_unfinished ON ct_tasks (unique_key)
    WHERE unique_key IS NOT NULL
      AND status NOT IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded');

CREATE INDEX IF NOT EXISTS ct_tasks_unique_key ON ct_tasks (unique_key, seq)
    WHERE unique_key IS NOT NULL;

-- name: migrate_9
-- Version 9: fleet limits (docs/queue.md, "Limits"). ct_limits holds the declared
-- limits (a key, a tag or a concurrency key or a pattern ending in '*', with its
-- concurrency and its rate such as '100/m'); the slots of concurrency limits stay in
-- ct_slots (one row per holder, named by the concrete key); ct_limit_starts holds one
-- row per start of a rate-limited key, counted until expires_at (the end of the window
-- that began with it). Every statement may run again on a migrated file.
CREATE TABLE IF NOT EXISTS ct_limits (
    key TEXT PRIMARY KEY,
    concurrency INTEGER,
    rate TEXT,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS ct_limit_starts (
    key TEXT NOT NULL,
    task_id TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (key, started_at, task_id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS ct_limit_starts_expiry ON ct_limit_starts (expires_at);

-- name: migrate_10
-- Version 10: paused queues (docs/queue.md, "Pause intake"). One row per paused queue,
-- keyed by scope ('name:noop' or 'bucket:3'): the task name or the bucket (the other
-- is NULL), who paused it, why and when. claim_queued passes over the queued tasks of
-- every row, in its own statement. Every statement may run again on a migrated file.
CREATE TABLE IF NOT EXISTS ct_queue_pauses (
    scope TEXT PRIMARY KEY,
    name TEXT,
    bucket INTEGER,
    actor TEXT NOT NULL,
    reason TEXT NOT NULL,
    paused_at INTEGER NOT NULL
) WITHOUT ROWID;

-- name: migrate_11
-- Version 11: PostgreSQL widens a task's priority to 64 bits; SQLite's INTEGER is 64
-- bits already, so nothing changes here but the version.
SELECT 1;

-- name: migrate_12
-- Version 12: child tasks (docs/queue.md, "Child tasks"). A task enqueued by another
-- task (ctx.enqueue) keeps its parent's id in metadata["parent"], copied into
-- meta_parent so that the children of a task (listed on its page, stopped with it) are
-- found through ct_tasks_parent. Rows written before this version have no children:
-- their meta_parent stays NULL. The store skips the ADD COLUMN on a file that has the
-- column already.
ALTER TABLE ct_tasks ADD COLUMN meta_parent TEXT;

CREATE INDEX IF NOT EXISTS ct_tasks_parent ON ct_tasks (meta_parent, created_at, seq)
    WHERE meta_parent IS NOT NULL;

-- name: migrate_13
-- Version 13: charts (docs/dashboard.md, "Charts"). Each transition keeps its instant
-- (occurred_at, microseconds since the epoch) and, when a chart counts it, its target
-- status (charted: running, succeeded, failed or lost, as
-- chongming_task.stores._activity.CHARTED; NULL for the others) as columns beside its
-- document, written in the same statement. ct_transitions_at orders the charted ones
-- by status and instant (the others are not in it, which spares most transitions an
-- index write), so a chart of the last hour or day counts index ranges and never reads
-- the whole history. Rows written before this version keep
-- NULL there and are not charted (a chart spans a day at most: it fills in within a
-- day). The store skips an ADD COLUMN whose column exists.
ALTER TABLE ct_transitions ADD COLUMN occurred_at INTEGER;

ALTER TABLE ct_transitions ADD COLUMN charted TEXT;

CREATE INDEX IF NOT EXISTS ct_transitions_at ON ct_transitions (charted, occurred_at)
    WHERE charted IS NOT NULL;

-- The queue depth per bucket counts the queued tasks nobody holds by bucket from this
-- partial index (only those rows are in it), without reading a task row.
CREATE INDEX IF NOT EXISTS ct_tasks_queued_bucket ON ct_tasks (bucket)
    WHERE status = 'queued' AND owner IS NULL;

-- name: migrate_14
-- Version 14: the worker submission commands (kind 'task', action 'submit') are
-- retired: the work queue is the one way work crosses processes. No table changes.
-- In the same transaction the store turns every submission no worker has stored as a
-- task into the queued task Client.enqueue stores for it, and completes its command
-- (chongming_task.stores._legacy, with legacy_submissions and legacy_settle below).
-- Commands lose their priority (only submissions had one): they are claimed oldest
-- first, the action index is rebuilt on (action, seq) over the claimable rows, and the
-- column goes. Every statement may run again on a migrated file (the store skips a
-- DROP COLUMN whose column is gone, as it skips an ADD COLUMN whose column exists).
DROP INDEX IF EXISTS ct_commands_claim;

CREATE INDEX IF NOT EXISTS ct_commands_claim ON ct_commands (action, seq)
    WHERE status IN ('pending', 'claimed');

ALTER TABLE ct_commands DROP COLUMN priority;

-- name: legacy_submissions
SELECT command_id, kind, target, action, target_owner, status, claimed_by, claim_token,
       lease_until, claims, completed_at, result, doc
FROM ct_commands c
WHERE kind = 'task' AND action = 'submit' AND status IN ('pending', 'claimed')
  AND NOT EXISTS (SELECT 1 FROM ct_tasks t WHERE t.task_id = c.target)
ORDER BY seq;

-- name: legacy_settle
UPDATE ct_commands SET status = 'completed', completed_at = :now, lease_until = NULL,
    result = :result
WHERE command_id = :command_id;

-- name: migrate_15
-- Version 15: the work queue's waiting tasks (queued, held by nobody, enqueued with a
-- recipe) by bucket and age, for queue_health (chongming-task health, the dashboard's
-- overview, workers and buckets pages): the depth of each bucket is a count of this
-- partial index and its oldest task the first entry of its range, so nothing decodes a
-- queued task. Only those rows are in it; its condition reads the document (the recipe)
-- only for a queued unheld row: an enqueue and a claim, never another transition.
CREATE INDEX IF NOT EXISTS ct_tasks_waiting ON ct_tasks (bucket, created_at, seq)
    WHERE status = 'queued' AND owner IS NULL
      AND json_type(doc, '$.metadata.recipe') = 'object';

-- Each tag row keeps its task's name, kept by the triggers like the tag itself (a
-- task's name is written with its tags, never by a transition), so a search by tag
-- and name prefix is one range of ct_task_tags_name and its count reads no task row.
-- Rows written before this version get the name of their task here. The store skips
-- the ADD COLUMN on a file that has the column already.
ALTER TABLE ct_task_tags ADD COLUMN name TEXT;

UPDATE ct_task_tags SET name = (SELECT t.name FROM ct_tasks t WHERE t.seq = ct_task_tags.seq)
WHERE name IS NULL;

CREATE INDEX IF NOT EXISTS ct_task_tags_name ON ct_task_tags (tag, name);

DROP TRIGGER IF EXISTS ct_tasks_tags_insert;

CREATE TRIGGER ct_tasks_tags_insert AFTER INSERT ON ct_tasks WHEN new.tags <> '[]'
BEGIN
    INSERT OR IGNORE INTO ct_task_tags (tag, seq, name)
    SELECT value, new.seq, new.name FROM json_each(new.tags);
END;

DROP TRIGGER IF EXISTS ct_tasks_tags_update;

CREATE TRIGGER ct_tasks_tags_update AFTER UPDATE OF tags, name ON ct_tasks
WHEN old.tags IS NOT new.tags OR old.name IS NOT new.name
BEGIN
    DELETE FROM ct_task_tags WHERE seq = old.seq;
    INSERT OR IGNORE INTO ct_task_tags (tag, seq, name)
    SELECT value, new.seq, new.name FROM json_each(new.tags);
END;

-- The whole store's counts per status and per bucket (the overview, the unfiltered task
-- list, the buckets page, the live fingerprint) without a scan of every task: the
-- finished tasks (terminal statuses: almost all of a store's tasks) are counted by
-- triggers in the transaction that writes them; the unfinished ones are counted from
-- their ranges of ct_tasks_status_created at read time (status_totals). A trigger
-- fires only when a task enters or leaves a terminal status (once in a task's usual
-- life, at its end; a retry), is inserted or deleted finished, or changes bucket while
-- finished, and writes both its counts in one statement. One row per (kind, key):
-- ('status', a terminal status) and ('bucket', a bucket, -1 for none).
CREATE TABLE IF NOT EXISTS ct_terminal_counts (
    kind TEXT NOT NULL,
    key NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (kind, key)
) WITHOUT ROWID;

DELETE FROM ct_terminal_counts;

INSERT INTO ct_terminal_counts (kind, key, n)
SELECT 'status', status, count(*) FROM ct_tasks WHERE status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded') GROUP BY status;

INSERT INTO ct_terminal_counts (kind, key, n)
SELECT 'bucket', coalesce(bucket, -1), count(*) FROM ct_tasks WHERE status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded')
GROUP BY coalesce(bucket, -1);

DROP TRIGGER IF EXISTS ct_tasks_count_insert;

CREATE TRIGGER ct_tasks_count_insert AFTER INSERT ON ct_tasks
WHEN new.status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded')
BEGIN
    INSERT INTO ct_terminal_counts (kind, key, n)
    VALUES ('status', new.status, 1), ('bucket', coalesce(new.bucket, -1), 1)
    ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

DROP TRIGGER IF EXISTS ct_tasks_count_enter;

CREATE TRIGGER ct_tasks_count_enter AFTER UPDATE OF status, bucket ON ct_tasks
WHEN new.status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded') AND (old.status IS NOT new.status OR old.bucket IS NOT new.bucket)
BEGIN
    INSERT INTO ct_terminal_counts (kind, key, n)
    VALUES ('status', new.status, 1), ('bucket', coalesce(new.bucket, -1), 1)
    ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

DROP TRIGGER IF EXISTS ct_tasks_count_leave;

CREATE TRIGGER ct_tasks_count_leave AFTER UPDATE OF status, bucket ON ct_tasks
WHEN old.status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded') AND (old.status IS NOT new.status OR old.bucket IS NOT new.bucket)
BEGIN
    INSERT INTO ct_terminal_counts (kind, key, n)
    VALUES ('status', old.status, -1), ('bucket', coalesce(old.bucket, -1), -1)
    ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

DROP TRIGGER IF EXISTS ct_tasks_count_delete;

CREATE TRIGGER ct_tasks_count_delete AFTER DELETE ON ct_tasks
WHEN old.status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded')
BEGIN
    INSERT INTO ct_terminal_counts (kind, key, n)
    VALUES ('status', old.status, -1), ('bucket', coalesce(old.bucket, -1), -1)
    ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

-- name: schema_exists
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ct_meta';

-- name: schema_version
SELECT value FROM ct_meta WHERE key = 'schema_version';

-- name: set_schema_version
INSERT INTO ct_meta (key, value) VALUES ('schema_version', :version)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- name: insert_task
INSERT INTO ct_tasks (
    task_id, name, status, status_version, created_at, updated_at, priority, bucket,
    owner, meta_schedule, meta_pipeline, tags, progress, heartbeat_at, lease_owner,
    lease_until, pid, doc, checkpoint_gaps, meta_parent
) VALUES (
    :task_id, :name, :status, :status_version, :created_at, :updated_at, :priority, :bucket,
    :owner, :meta_schedule, :meta_pipeline, :tags, :progress, :heartbeat_at, :lease_owner,
    :lease_until, :pid, :doc, :checkpoint_gaps, :meta_parent
);

-- name: update_task
UPDATE ct_tasks SET
    name = :name, status = :status, status_version = :status_version,
    created_at = :created_at, updated_at = :updated_at, priority = :priority,
    bucket = :bucket, owner = :owner, meta_schedule = :meta_schedule,
    meta_pipeline = :meta_pipeline, tags = :tags, progress = :progress,
    heartbeat_at = :heartbeat_at, lease_owner = :lease_owner, lease_until = :lease_until,
    pid = :pid, doc = :doc,
    checkpoint_gaps = :checkpoint_gaps, meta_parent = :meta_parent
WHERE task_id = :task_id AND status_version = :expect_version;

-- name: update_task_hot
-- The fast path of save: only the columns a transition changes are SET (SQLite
-- rewrites the entries of every index whose columns appear in SET), and the row must
-- still have the given values for the rest; if any of those changed, zero rows match
-- and the store runs update_task instead.
UPDATE ct_tasks SET
    status = :status, status_version = :status_version, updated_at = :updated_at,
    progress = :progress, heartbeat_at = :heartbeat_at, lease_owner = :lease_owner,
    lease_until = :lease_until, pid = :pid, doc = :doc,
    checkpoint_gaps = :checkpoint_gaps
WHERE task_id = :task_id AND status_version = :expect_version
  AND name = :name AND created_at = :created_at AND priority = :priority
  AND bucket IS :bucket AND owner IS :owner AND meta_schedule IS :meta_schedule
  AND meta_pipeline IS :meta_pipeline AND tags = :tags AND meta_parent IS :meta_parent;

-- name: select_lost
-- mark_lost_many's candidates, without the document: what the caller's failure function
-- and the transition record need, the document's format version (another one takes the
-- generic path) and the row's seq, by which mark_lost finds it again; meta_pipeline
-- says which of them may be fleet pipeline nodes (whose dependants are judged next).
SELECT t.seq, t.task_id, t.status, t.status_version, t.owner, t.lease_owner, t.lease_until,
       json_extract(t.doc, '$.v'), json_extract(t.doc, '$.attempt'), t.meta_pipeline
FROM ct_tasks t

-- name: mark_lost
-- One task to lost with the change the state machine computed for its group: the
-- columns, and the same members of the document the codec would write (the side-channel
-- columns are copied into it, as encoding a decoded snapshot does). Found by seq (read
-- by select_lost in the same transaction) and guarded by its version.
UPDATE ct_tasks SET
    status = :status, status_version = :status_version, updated_at = :updated_at,
    lease_until = :lease_until,
    doc = json_set(
        doc,
        '$.status', :status,
        '$.status_version', :status_version,
        '$.updated_at', :updated_at_text,
        '$.finished_at', :finished_at,
        '$.progress', json(progress),
        '$.last_heartbeat_at', heartbeat_at,
        '$.lease_owner', lease_owner,
        '$.lease_until', :lease_until,
        '$.failure', json(:failure),
        '$.pid', pid
    )
WHERE seq = :seq AND status_version = :expect_version;

-- name: task_version
SELECT status_version FROM ct_tasks WHERE task_id = :task_id;

-- name: insert_transition
INSERT OR IGNORE INTO ct_transitions (task_id, version, doc, occurred_at, charted)
VALUES (:task_id, :version, :doc, :occurred_at, :charted);

-- name: select_task
SELECT doc, progress, heartbeat_at, lease_owner, lease_until, pid, task_id, checkpoint_gaps
FROM ct_tasks WHERE task_id = :task_id;

-- name: select_tasks
SELECT t.doc, t.progress, t.heartbeat_at, t.lease_owner, t.lease_until, t.pid, t.task_id,
  t.checkpoint_gaps
FROM ct_tasks t

-- name: select_heads
SELECT t.task_id, t.status, t.status_version FROM ct_tasks t

-- name: count_tasks
SELECT t.status, count(*) FROM ct_tasks t

-- name: count_all
SELECT count(*) FROM ct_tasks t

-- name: status_totals
-- count_by_status of the whole store: the finished tasks' trigger-kept counts (migrate_15),
-- then every other status counted in its range of ct_tasks_status_created (covering: as
-- many index entries as there are unfinished tasks), in one snapshot. The ranges lie
-- between the terminal statuses, so a status the library does not know is counted too
-- (and refused as corrupt by the reader). The third column is how many counter rows
-- were summed (PostgreSQL folds them when many).
SELECT key, n, 1 FROM ct_terminal_counts WHERE kind = 'status'
UNION ALL
SELECT status, count(*), 0 FROM ct_tasks WHERE status < 'cancelled' GROUP BY status
UNION ALL
SELECT status, count(*), 0 FROM ct_tasks WHERE status > 'cancelled' AND status < 'failed'
GROUP BY status
UNION ALL
SELECT status, count(*), 0 FROM ct_tasks WHERE status > 'failed' AND status < 'lost'
GROUP BY status
UNION ALL
SELECT status, count(*), 0 FROM ct_tasks WHERE status > 'lost' AND status < 'skipped'
GROUP BY status
UNION ALL
SELECT status, count(*), 0 FROM ct_tasks WHERE status > 'skipped' AND status < 'stopped'
GROUP BY status
UNION ALL
SELECT status, count(*), 0 FROM ct_tasks WHERE status > 'stopped' AND status < 'succeeded'
GROUP BY status
UNION ALL
SELECT status, count(*), 0 FROM ct_tasks WHERE status > 'succeeded' GROUP BY status

-- name: bucket_totals
-- count_by_bucket likewise: the finished tasks' counts per bucket, then the other
-- tasks' (found in the same ranges of the status index, their rows read for the bucket;
-- INDEXED BY: without statistics the planner would rather walk every task of a bucket).
SELECT key, n, 1 FROM ct_terminal_counts WHERE kind = 'bucket' AND key <> -1
UNION ALL
SELECT bucket, count(*), 0 FROM (
    SELECT bucket FROM ct_tasks INDEXED BY ct_tasks_status_created
    WHERE status < 'cancelled'
        OR (status > 'cancelled' AND status < 'failed') OR (status > 'failed' AND status < 'lost')
        OR (status > 'lost' AND status < 'skipped') OR (status > 'skipped' AND status < 'stopped')
        OR (status > 'stopped' AND status < 'succeeded') OR status > 'succeeded'
) WHERE bucket IS NOT NULL
GROUP BY bucket

-- name: count_tag
-- count_tasks of a tag alone (and a name prefix, a filter_tag_name_* clause appended):
-- a range of ct_task_tags_name, no task row read.
SELECT count(*) FROM ct_task_tags g WHERE g.tag = :tag

-- name: count_tag_name_range
g.name >= :name_low AND g.name < :name_high

-- name: count_tag_name_from
g.name >= :name_low

-- name: walk_tasks
-- select_tasks walking ct_tasks_created (a page of filters no index orders by creation,
-- see SqlStore._walk): in the list's order, a filter checked per row, stopped at the
-- limit. Without statistics the planner would rather read every task of a name prefix
-- or a tag and sort them all.
SELECT t.doc, t.progress, t.heartbeat_at, t.lease_owner, t.lease_until, t.pid, t.task_id,
  t.checkpoint_gaps
FROM ct_tasks t INDEXED BY ct_tasks_created

-- name: walk_heads
SELECT t.task_id, t.status, t.status_version FROM ct_tasks t INDEXED BY ct_tasks_created

-- name: walk_edge
-- How far a walk goes: the creation time of the task :walk places further in the list's
-- order (an index offset, no task row read).
SELECT t.created_at FROM ct_tasks t INDEXED BY ct_tasks_created

-- name: filter_walk_from
t.created_at >= :walk_edge

-- name: filter_walk_to
t.created_at <= :walk_edge

-- name: count_buckets
SELECT bucket, count(*) FROM ct_tasks WHERE bucket IS NOT NULL GROUP BY bucket;

-- name: filter_status
t.status = :status

-- name: filter_statuses
t.status IN (SELECT value FROM json_each(:statuses))

-- name: filter_name_range
(t.name >= :name_low AND t.name < :name_high)

-- name: filter_name_from
t.name >= :name_low

-- name: filter_id_range
(t.task_id >= :id_low AND t.task_id < :id_high)

-- name: filter_id_from
t.task_id >= :id_low

-- name: filter_id_after
t.task_id > :id_after

-- name: filter_argument
((json_type(t.doc, '$.metadata.recipe.args') = 'array'
  AND instr(json_extract(t.doc, '$.metadata.recipe.args'), :argument) > 0)
 OR (json_type(t.doc, '$.metadata.recipe.kwargs') = 'object'
  AND instr(json_extract(t.doc, '$.metadata.recipe.kwargs'), :argument) > 0))

-- name: filter_tag
t.seq IN (SELECT g.seq FROM ct_task_tags g WHERE g.tag = :tag)

-- name: filter_tag_probe
-- filter_tag checked row by row (a walk, see walk_tasks): one look-up of the primary key
-- of ct_task_tags per task walked, instead of first collecting every task of the tag.
EXISTS (SELECT 1 FROM ct_task_tags g WHERE g.tag = :tag AND g.seq = t.seq)

-- name: filter_tag_name_range
-- filter_tag with a name prefix: the tasks of the tag whose name is in the range, from
-- ct_task_tags_name.
t.seq IN (SELECT g.seq FROM ct_task_tags g
          WHERE g.tag = :tag AND g.name >= :name_low AND g.name < :name_high)

-- name: filter_tag_name_from
t.seq IN (SELECT g.seq FROM ct_task_tags g WHERE g.tag = :tag AND g.name >= :name_low)

-- name: filter_bucket
t.bucket = :bucket

-- name: filter_buckets
t.bucket IN (SELECT value FROM json_each(:buckets))

-- name: filter_owner
t.owner = :owner

-- name: filter_owned
t.owner IS NOT NULL

-- name: filter_unowned
t.owner IS NULL

-- name: filter_meta_schedule
t.meta_schedule = :meta_schedule

-- name: filter_meta_pipeline
t.meta_pipeline = :meta_pipeline

-- name: filter_meta_parent
t.meta_parent = :meta_parent

-- name: filter_task_ids
t.task_id IN (SELECT value FROM json_each(:task_ids))

-- name: filter_created_after
t.created_at >= :created_after

-- name: filter_created_before
t.created_at < :created_before

-- name: filter_updated_after
t.updated_at >= :updated_after

-- name: filter_updated_before
t.updated_at < :updated_before

-- name: filter_lease_expired
-- lease_until is the ISO text of an aware datetime, in whatever offset it was written
-- with. julianday() compares instants but only to the millisecond (and cannot read an
-- offset with seconds), so it settles the clear cases and the exact comparison, in
-- Python (ct_lease_expired, registered on every connection), runs only for a lease
-- in the same millisecond as the cutoff or in an unusual format.
(t.lease_until IS NULL
 OR julianday(t.lease_until) < julianday(:lease_cutoff_text)
 OR (coalesce(julianday(t.lease_until) = julianday(:lease_cutoff_text), 1)
     AND ct_lease_expired(t.lease_until, :lease_cutoff_at)))

-- name: filter_meta_key
EXISTS (
    SELECT 1 FROM json_each(t.doc, '$.metadata') m
    WHERE m.key = :meta_key_{i} AND m.type = 'text' AND m.value = :meta_value_{i}
)

-- name: limit
LIMIT :limit

-- name: prune_history
DELETE FROM ct_transitions WHERE task_id IN (
    SELECT task_id FROM ct_tasks WHERE status IN (SELECT value FROM json_each(:terminal))
    ORDER BY updated_at DESC, seq DESC LIMIT -1 OFFSET :keep
);

-- name: prune_tasks
DELETE FROM ct_tasks WHERE seq IN (
    SELECT seq FROM ct_tasks WHERE status IN (SELECT value FROM json_each(:terminal))
    ORDER BY updated_at DESC, seq DESC LIMIT -1 OFFSET :keep
);

-- name: delete_history_of
DELETE FROM ct_transitions WHERE task_id IN (SELECT value FROM json_each(:task_ids));

-- name: delete_tasks_by_id
DELETE FROM ct_tasks WHERE task_id IN (SELECT value FROM json_each(:task_ids));

-- name: delete_transitions
DELETE FROM ct_transitions WHERE task_id = :task_id
    AND version IN (SELECT value FROM json_each(:versions));

-- name: select_history
SELECT doc FROM ct_transitions WHERE task_id = :task_id ORDER BY version;

-- name: touch_task
UPDATE ct_tasks SET
    progress = COALESCE(:progress, progress),
    heartbeat_at = COALESCE(:heartbeat_at, heartbeat_at),
    lease_owner = COALESCE(:lease_owner, lease_owner),
    lease_until = COALESCE(:lease_until, lease_until),
    pid = COALESCE(:pid, pid),
    checkpoint_gaps = COALESCE(:checkpoint_gaps, checkpoint_gaps)
WHERE task_id = :task_id;

-- name: renew_leases
UPDATE ct_tasks SET lease_until = :lease_until
WHERE lease_owner = :owner AND task_id IN (SELECT value FROM json_each(:task_ids));

-- name: insert_command
INSERT INTO ct_commands (
    command_id, kind, target, action, target_owner, status, claims, doc
) VALUES (
    :command_id, :kind, :target, :action, :target_owner, 'pending', 0, :doc
) ON CONFLICT (command_id) DO NOTHING;

-- name: select_command
SELECT command_id, kind, target, action, target_owner, status, claimed_by, claim_token,
       lease_until, claims, completed_at, result, doc
FROM ct_commands WHERE command_id = :command_id;

-- name: claim_commands
-- Oldest first: RETURNING has no order, so the store sorts the claimed rows by seq.
UPDATE ct_commands SET
    status = 'claimed', claimed_by = :owner, claim_token = lower(hex(randomblob(16))),
    lease_until = :lease_until, claims = claims + 1
WHERE seq IN (
    SELECT seq FROM ct_commands
    WHERE status IN ('pending', 'claimed')
      AND (status = 'pending' OR lease_until <= :now)
      AND (target_owner = :owner OR target_owner IS NULL)
      AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
    ORDER BY seq LIMIT :limit
)
RETURNING seq, command_id, kind, target, action, target_owner, status, claimed_by,
          claim_token, lease_until, claims, completed_at, result, doc;

-- name: claim_commands_actions
-- claim_commands for the actions a claimer handles: searched by (action, seq) over
-- the claimable rows (INDEXED BY: without statistics the planner prefers
-- ct_commands_status, which walks every pending command of other actions).
-- The same statement with one more line: an "IS NULL OR" on that line, shared with
-- claim_commands, would keep the planner off the index.
UPDATE ct_commands SET
    status = 'claimed', claimed_by = :owner, claim_token = lower(hex(randomblob(16))),
    lease_until = :lease_until, claims = claims + 1
WHERE seq IN (
    SELECT seq FROM ct_commands INDEXED BY ct_commands_claim
    WHERE status IN ('pending', 'claimed')
      AND (status = 'pending' OR lease_until <= :now)
      AND (target_owner = :owner OR target_owner IS NULL)
      AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
      AND action IN (SELECT value FROM json_each(:actions))
    ORDER BY seq LIMIT :limit
)
RETURNING seq, command_id, kind, target, action, target_owner, status, claimed_by,
          claim_token, lease_until, claims, completed_at, result, doc;

-- name: complete_command
UPDATE ct_commands SET status = 'completed', completed_at = :now, lease_until = NULL,
    result = :result
WHERE command_id = :command_id AND claim_token = :claim_token AND status = 'claimed';

-- name: release_command
UPDATE ct_commands SET status = 'pending', claimed_by = NULL, claim_token = NULL,
    lease_until = NULL
WHERE command_id = :command_id AND claim_token = :claim_token AND status = 'claimed';

-- name: extend_command
UPDATE ct_commands SET lease_until = :lease_until
WHERE command_id = :command_id AND claim_token = :claim_token AND status = 'claimed';

-- name: commands_rev
SELECT value FROM ct_meta WHERE key = 'commands_rev';

-- name: insert_schedule
INSERT INTO ct_schedules (name, revision, updated_at, data)
VALUES (:name, 1, :updated_at, :data)
ON CONFLICT (name) DO NOTHING;

-- name: update_schedule
UPDATE ct_schedules SET revision = revision + 1, updated_at = :updated_at, data = :data
WHERE name = :name AND revision = :expect_revision;

-- name: select_schedule
SELECT name, revision, updated_at, data FROM ct_schedules WHERE name = :name;

-- name: select_schedules
SELECT name, revision, updated_at, data FROM ct_schedules ORDER BY name;

-- name: delete_schedule
DELETE FROM ct_schedules WHERE name = :name;

-- name: claim_firing
INSERT INTO ct_firings (schedule, scheduled_at, owner, task_id, claimed_at)
VALUES (:schedule, :scheduled_at, :owner, :task_id, :now)
ON CONFLICT (schedule, scheduled_at) DO NOTHING;

-- name: prune_firings
DELETE FROM ct_firings WHERE scheduled_at < :before;

-- name: update_task_unheld
-- update_task, only while nobody holds the task (a queued task a worker has not
-- claimed): a stop or pause from any process races a claim and exactly one wins.
UPDATE ct_tasks SET
    name = :name, status = :status, status_version = :status_version,
    created_at = :created_at, updated_at = :updated_at, priority = :priority,
    bucket = :bucket, owner = :owner, meta_schedule = :meta_schedule,
    meta_pipeline = :meta_pipeline, tags = :tags, progress = :progress,
    heartbeat_at = :heartbeat_at, lease_owner = :lease_owner, lease_until = :lease_until,
    pid = :pid, doc = :doc,
    checkpoint_gaps = :checkpoint_gaps, meta_parent = :meta_parent
WHERE task_id = :task_id AND status_version = :expect_version AND owner IS NULL;

-- name: claim_queued
-- Walks the partial index ct_tasks_claimable in claim order (INDEXED BY: without
-- statistics the planner sorts every queued row instead) and stops at the limit; rows
-- not due yet (recipe.not_before, compared as an instant) or without a recipe are
-- passed over in the walk, so any number of delayed tasks cannot hide a due one.
-- limited: whether any fleet limit is declared, read by the claim's first statement
-- (without one, the claim reads no limits; with one, it counts their use and reads
-- again with the full keys left out).
-- :full: the limit keys with no room (tags or concurrency keys, a JSON array); their
-- tasks are passed over.
-- The tasks of a paused queue (a row of ct_queue_pauses naming their task name or
-- their bucket) are passed over too: a pause is obeyed by the statement that claims.
SELECT t.doc, t.progress, t.heartbeat_at, t.lease_owner, t.lease_until, t.pid, t.task_id,
  t.checkpoint_gaps, EXISTS (SELECT 1 FROM ct_limits) AS limited
FROM ct_tasks t INDEXED BY ct_tasks_claimable WHERE t.status = 'queued' AND t.owner IS NULL
    AND json_type(t.doc, '$.metadata.recipe') = 'object'
    AND (json_extract(t.doc, '$.metadata.recipe.not_before') IS NULL
        OR julianday(json_extract(t.doc, '$.metadata.recipe.not_before')) <= julianday(:now))
    AND (:full = '[]' OR NOT EXISTS (
        SELECT 1 FROM ct_task_tags g
        WHERE g.seq = t.seq AND g.tag IN (SELECT value FROM json_each(:full)))
        AND coalesce(json_extract(t.doc, '$.metadata.recipe.concurrency_key'), '')
            NOT IN (SELECT value FROM json_each(:full)))
    AND NOT EXISTS (SELECT 1 FROM ct_queue_pauses p WHERE p.name = t.name OR p.bucket = t.bucket)
ORDER BY t.priority DESC, t.created_at, t.seq LIMIT :limit;

-- name: claim_queued_buckets
SELECT t.doc, t.progress, t.heartbeat_at, t.lease_owner, t.lease_until, t.pid, t.task_id,
  t.checkpoint_gaps, EXISTS (SELECT 1 FROM ct_limits) AS limited
FROM ct_tasks t INDEXED BY ct_tasks_claimable WHERE t.status = 'queued' AND t.owner IS NULL
    AND json_type(t.doc, '$.metadata.recipe') = 'object'
    AND (json_extract(t.doc, '$.metadata.recipe.not_before') IS NULL
        OR julianday(json_extract(t.doc, '$.metadata.recipe.not_before')) <= julianday(:now))
    AND t.bucket IN (SELECT value FROM json_each(:buckets))
    AND (:full = '[]' OR NOT EXISTS (
        SELECT 1 FROM ct_task_tags g
        WHERE g.seq = t.seq AND g.tag IN (SELECT value FROM json_each(:full)))
        AND coalesce(json_extract(t.doc, '$.metadata.recipe.concurrency_key'), '')
            NOT IN (SELECT value FROM json_each(:full)))
    AND NOT EXISTS (SELECT 1 FROM ct_queue_pauses p WHERE p.name = t.name OR p.bucket = t.bucket)
ORDER BY t.priority DESC, t.created_at, t.seq LIMIT :limit;

-- name: purge_slots
-- (Claims run inside BEGIN IMMEDIATE: SQLite serialises them, no lock is needed.)
DELETE FROM ct_slots WHERE lease_until <= :now;

-- name: count_slots
SELECT name, count(*) FROM ct_slots WHERE lease_until > :now GROUP BY name;

-- name: insert_slot
INSERT INTO ct_slots (name, task_id, owner, acquired_at, lease_until)
VALUES (:name, :task_id, :owner, :now, :lease_until)
ON CONFLICT (name, task_id) DO UPDATE SET
    owner = excluded.owner, acquired_at = excluded.acquired_at,
    lease_until = excluded.lease_until;

-- name: renew_slots
UPDATE ct_slots SET lease_until = :slot_until
WHERE owner = :owner AND task_id IN (SELECT value FROM json_each(:task_ids));

-- name: release_slots
DELETE FROM ct_slots WHERE task_id = :task_id AND owner = :owner;

-- name: select_slots
SELECT name, task_id, owner, acquired_at, lease_until FROM ct_slots
ORDER BY name, acquired_at, task_id;

-- name: purge_starts
DELETE FROM ct_limit_starts WHERE expires_at <= :now;

-- name: count_starts
SELECT key, count(*) FROM ct_limit_starts WHERE expires_at > :now GROUP BY key;

-- name: insert_start
INSERT INTO ct_limit_starts (key, task_id, started_at, expires_at)
VALUES (:key, :task_id, :now, :expires_at)
ON CONFLICT DO NOTHING;

-- name: select_starts
SELECT key, task_id, started_at, expires_at FROM ct_limit_starts
ORDER BY started_at, key, task_id;

-- name: select_limits
SELECT key, concurrency, rate FROM ct_limits ORDER BY key;

-- name: upsert_limit
INSERT INTO ct_limits (key, concurrency, rate, updated_at)
VALUES (:key, :concurrency, :rate, :now)
ON CONFLICT (key) DO UPDATE SET
    concurrency = excluded.concurrency, rate = excluded.rate, updated_at = excluded.updated_at;

-- name: delete_limit
DELETE FROM ct_limits WHERE key = :key;

-- name: upsert_pause
INSERT INTO ct_queue_pauses (scope, name, bucket, actor, reason, paused_at)
VALUES (:scope, :name, :bucket, :actor, :reason, :paused_at)
ON CONFLICT (scope) DO UPDATE SET
    actor = excluded.actor, reason = excluded.reason, paused_at = excluded.paused_at;

-- name: delete_pause
DELETE FROM ct_queue_pauses WHERE scope = :scope
RETURNING name, bucket, actor, reason, paused_at;

-- name: select_pauses
SELECT name, bucket, actor, reason, paused_at FROM ct_queue_pauses ORDER BY scope;

-- name: notify_work
UPDATE ct_meta SET value = value + 1 WHERE key = 'commands_rev';

-- name: take_write_lock
-- A write that changes nothing: in the caller's transaction (enqueue(connection=...))
-- it takes the file's write lock before the unique-key reads, as BEGIN IMMEDIATE does.
UPDATE ct_meta SET value = value WHERE key = 'commands_rev';

-- name: upsert_worker
INSERT INTO ct_workers (worker_id, heartbeat_at, doc) VALUES (:worker_id, :heartbeat_at, :doc)
ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, doc = excluded.doc;

-- name: select_workers
SELECT doc FROM ct_workers ORDER BY worker_id;

-- name: delete_worker
DELETE FROM ct_workers WHERE worker_id = :worker_id;

-- name: unique_standing
-- The tasks of a key that may stand: unfinished, or updated since the window opened
-- (a task's updated_at is never before its finished_at); the caller checks finished_at.
-- Called inside BEGIN IMMEDIATE, which already serialises writers.
SELECT task_id, status, json_extract(doc, '$.finished_at') FROM ct_tasks
WHERE unique_key = :unique_key
  AND (status NOT IN (SELECT value FROM json_each(:terminal))
       OR updated_at >= :finished_since)
ORDER BY seq DESC;

-- name: set_unique_key
UPDATE ct_tasks SET unique_key = :unique_key WHERE task_id = :task_id;

-- name: chart_transitions
-- The charts' counts (docs/dashboard.md, "Charts"): per slot k of :step microseconds
-- from :since and per charted status, the transitions into it, each a range count of
-- the covering index ct_transitions_at (charted, occurred_at). One GROUP BY over the
-- window would sort every transition of it (a day of a busy store: half a million)
-- in a temporary b-tree; :slots range counts read the same index entries and sort none.
WITH RECURSIVE slots(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM slots WHERE k < :slots - 1)
SELECT k, s.value, (
    SELECT count(*) FROM ct_transitions INDEXED BY ct_transitions_at
    WHERE charted = s.value
      AND occurred_at >= :since + k * :step AND occurred_at < :since + (k + 1) * :step)
FROM slots, json_each(:statuses) s;

-- name: chart_durations
-- The charts' durations: the most recent :sample tasks that finished (succeeded or
-- failed) in the window, newest first, through ct_tasks_updated (a finished task's
-- updated_at is its finish time or later); the caller keeps those that finished inside.
-- INDEXED BY: without statistics the planner reads every finished task through
-- ct_tasks_status_created and sorts them, a read that grows with the store.
SELECT name, json_extract(doc, '$.started_at'), json_extract(doc, '$.finished_at'), status
FROM ct_tasks INDEXED BY ct_tasks_updated
WHERE updated_at >= :since AND status IN ('succeeded', 'failed')
ORDER BY updated_at DESC LIMIT :sample;

-- name: chart_queued
-- Queue depth per task bucket: queued tasks nobody holds (NULL: no bucket), counted in
-- the partial index ct_tasks_queued_bucket.
SELECT bucket, count(*) FROM ct_tasks INDEXED BY ct_tasks_queued_bucket
WHERE status = 'queued' AND owner IS NULL GROUP BY bucket;

-- name: waiting_work
-- The work queue's waiting tasks per bucket (TaskRecordStore.waiting_work): the depth
-- counted in the partial index ct_tasks_waiting (no task row read: its condition is
-- the index's own), then, per bucket, the queued_at of the oldest task by creation,
-- the first entry of the bucket's range (one row read per bucket).
WITH w AS (
    SELECT bucket, count(*) AS depth FROM ct_tasks INDEXED BY ct_tasks_waiting
    WHERE status = 'queued' AND owner IS NULL
      AND json_type(doc, '$.metadata.recipe') = 'object'
    GROUP BY bucket
)
SELECT w.bucket, w.depth, (
    SELECT coalesce(json_extract(t.doc, '$.queued_at'), json_extract(t.doc, '$.created_at'))
    FROM ct_tasks t INDEXED BY ct_tasks_waiting
    WHERE t.status = 'queued' AND t.owner IS NULL
      AND json_type(t.doc, '$.metadata.recipe') = 'object' AND t.bucket IS w.bucket
    ORDER BY t.created_at, t.seq LIMIT 1)
FROM w;

-- name: name_gaps
-- The checkpoint gaps of a task name's most recently created runs
-- (TaskRecordStore.checkpoint_gaps_of): a backward walk of the exact name's range of
-- ct_tasks_name, :limit rows, the gaps column only (NULL: a run without checkpoints).
SELECT task_id, checkpoint_gaps FROM ct_tasks WHERE name = :name
ORDER BY created_at DESC, seq DESC LIMIT :limit;
