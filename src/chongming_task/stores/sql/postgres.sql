-- SQL of PostgresTaskStore, in named sections (loaded by stores/_sqlfile.py).
--
-- Same section and parameter names as sqlite.sql; differences are the dialect's:
-- * instants are timestamptz; tags are a text[] with a GIN index;
-- * documents are `json`, not `jsonb`: json keeps the codec's text exactly, while
--   jsonb rewrites numbers (1e300 would come back as a 301-digit integer, 1e16 as an
--   int). Nothing filters inside a document except arbitrary metadata keys, which the
--   json operators handle; every hot filter is its own typed, indexed column;
-- * names and ids use the "C" collation: byte order makes prefix ranges exact and
--   index-backed whatever the database's locale;
-- * writes that touch two tables are one statement (data-modifying CTEs): atomic in
--   autocommit mode and a single round trip;
-- * command claims lock with FOR UPDATE SKIP LOCKED so concurrent claimers never wait
--   on, or double-claim, the same row.

-- name: migrate_1
CREATE TABLE IF NOT EXISTS ct_meta (
    key text PRIMARY KEY,
    value bigint NOT NULL
);

INSERT INTO ct_meta (key, value) VALUES ('commands_rev', 0) ON CONFLICT DO NOTHING;

CREATE TABLE IF NOT EXISTS ct_tasks (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id text COLLATE "C" NOT NULL UNIQUE,
    name text COLLATE "C" NOT NULL,
    status text NOT NULL,
    status_version bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    priority integer NOT NULL,
    bucket integer,
    owner text,
    meta_schedule text,
    meta_pipeline text,
    tags text[] NOT NULL,
    progress json,
    heartbeat_at text,
    lease_owner text,
    lease_until text,
    pid integer,
    doc json NOT NULL
);

CREATE INDEX IF NOT EXISTS ct_tasks_status_created ON ct_tasks (status, created_at, seq);
CREATE INDEX IF NOT EXISTS ct_tasks_created ON ct_tasks (created_at, seq);
CREATE INDEX IF NOT EXISTS ct_tasks_updated ON ct_tasks (updated_at, seq);
CREATE INDEX IF NOT EXISTS ct_tasks_priority ON ct_tasks (priority DESC, created_at, seq);
CREATE INDEX IF NOT EXISTS ct_tasks_name ON ct_tasks (name, created_at, seq);
CREATE INDEX IF NOT EXISTS ct_tasks_bucket ON ct_tasks (bucket, created_at, seq)
    WHERE bucket IS NOT NULL;
CREATE INDEX IF NOT EXISTS ct_tasks_owner ON ct_tasks (owner, created_at, seq)
    WHERE owner IS NOT NULL;
CREATE INDEX IF NOT EXISTS ct_tasks_schedule ON ct_tasks (meta_schedule, created_at, seq)
    WHERE meta_schedule IS NOT NULL;
CREATE INDEX IF NOT EXISTS ct_tasks_pipeline ON ct_tasks (meta_pipeline, created_at, seq)
    WHERE meta_pipeline IS NOT NULL;
CREATE INDEX IF NOT EXISTS ct_tasks_tags ON ct_tasks USING gin (tags);

CREATE TABLE IF NOT EXISTS ct_transitions (
    task_id text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    doc json NOT NULL,
    PRIMARY KEY (task_id, version)
);

CREATE TABLE IF NOT EXISTS ct_commands (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    command_id text NOT NULL UNIQUE,
    kind text NOT NULL,
    target text NOT NULL,
    action text NOT NULL,
    target_owner text,
    status text NOT NULL,
    claimed_by text,
    claim_token text,
    lease_until timestamptz,
    claims integer NOT NULL,
    completed_at timestamptz,
    result json,
    doc json NOT NULL
);

CREATE INDEX IF NOT EXISTS ct_commands_status ON ct_commands (status, seq);

-- name: migrate_2
-- Version 2 adds the scheduler's control records and firing claims.
CREATE TABLE IF NOT EXISTS ct_schedules (
    name text PRIMARY KEY,
    revision bigint NOT NULL,
    updated_at timestamptz NOT NULL,
    data json NOT NULL
);

CREATE TABLE IF NOT EXISTS ct_firings (
    schedule text NOT NULL,
    scheduled_at timestamptz NOT NULL,
    owner text NOT NULL,
    task_id text NOT NULL,
    claimed_at timestamptz NOT NULL,
    PRIMARY KEY (schedule, scheduled_at)
);

CREATE INDEX IF NOT EXISTS ct_firings_scheduled_at ON ct_firings (scheduled_at);

-- name: migrate_3
-- Version 3: claim commands by action through an index (see claim_commands_actions).
CREATE INDEX IF NOT EXISTS ct_commands_action ON ct_commands (status, action, seq);

-- name: migrate_4
-- Version 4: commands are claimed highest priority first, then oldest (seq). A worker
-- submission's priority is its payload's integer "priority" (Command.claim_priority);
-- every other command has 0. Rows written before version 4 that can still be claimed
-- (pending or claimed) get theirs from the payload here, clamped to 64 bits like
-- claim_priority (a JSON number that is not a plain integer counts as none: 0);
-- completed ones keep 0 (never claimed again, and skipping them keeps the migration
-- short on a long command history). Every statement may run again on a migrated
-- schema and leaves it as it was.
ALTER TABLE ct_commands ADD COLUMN IF NOT EXISTS priority bigint NOT NULL DEFAULT 0;

UPDATE ct_commands SET priority = CASE
    WHEN json_typeof(doc -> 'payload' -> 'priority') = 'number'
         AND (doc -> 'payload' ->> 'priority') ~ '^-?[0-9]+$'
    THEN least(greatest((doc -> 'payload' ->> 'priority')::numeric,
                        -9223372036854775808), 9223372036854775807)::bigint
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
-- ct_workers. Every statement may run again on a migrated schema.
CREATE INDEX IF NOT EXISTS ct_tasks_claimable ON ct_tasks (priority DESC, created_at, seq)
    WHERE status = 'queued' AND owner IS NULL;

CREATE TABLE IF NOT EXISTS ct_workers (
    worker_id text PRIMARY KEY,
    heartbeat_at timestamptz NOT NULL,
    doc json NOT NULL
);

-- name: migrate_6
-- Version 6: the gaps between a task's checkpoints (docs/explain.md), a side-channel
-- column like progress: written by save and touch, never moving status_version.
ALTER TABLE ct_tasks ADD COLUMN IF NOT EXISTS checkpoint_gaps json;

-- name: migrate_7
-- Version 7: global limits (docs/queue.md, "Limits across workers"). One row per
-- holder of a slot of a named limit. A row counts while its lease_until (renewed with
-- the task's lease) has not passed, so a dead holder's slot frees itself. Every
-- statement may run again on a migrated schema.
CREATE TABLE IF NOT EXISTS ct_slots (
    name text COLLATE "C" NOT NULL,
    task_id text COLLATE "C" NOT NULL,
    owner text NOT NULL,
    acquired_at timestamptz NOT NULL,
    lease_until timestamptz NOT NULL,
    PRIMARY KEY (name, task_id)
);

CREATE INDEX IF NOT EXISTS ct_slots_task ON ct_slots (task_id);

-- name: migrate_8
-- Version 8: unique work (docs/queue.md, "Unique work"). A task created with a unique
-- key keeps it in unique_key (NULL for every other task and for every row written
-- before this version, so existing rows are kept as they are). At most one unfinished
-- task per key: the partial unique index is the store's constraint. The finished tasks
-- of a key (the unique_for window) are found through ct_tasks_unique_key. Every
-- statement may run again on a migrated schema.
ALTER TABLE ct_tasks ADD COLUMN IF NOT EXISTS unique_key text COLLATE "C";

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
-- that began with it). Every statement may run again on a migrated schema.
CREATE TABLE IF NOT EXISTS ct_limits (
    key text COLLATE "C" PRIMARY KEY,
    concurrency integer,
    rate text,
    updated_at timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS ct_limit_starts (
    key text COLLATE "C" NOT NULL,
    task_id text COLLATE "C" NOT NULL,
    started_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (key, started_at, task_id)
);

CREATE INDEX IF NOT EXISTS ct_limit_starts_expiry ON ct_limit_starts (expires_at);

-- name: migrate_10
-- Version 10: paused queues (docs/queue.md, "Pause intake"). One row per paused queue,
-- keyed by scope ('name:noop' or 'bucket:3'): the task name or the bucket (the other
-- is NULL), who paused it, why and when. claim_queued passes over the queued tasks of
-- every row, in its own statement. Every statement may run again on a migrated schema.
CREATE TABLE IF NOT EXISTS ct_queue_pauses (
    scope text COLLATE "C" PRIMARY KEY,
    name text COLLATE "C",
    bucket integer,
    actor text NOT NULL,
    reason text NOT NULL,
    paused_at timestamptz NOT NULL
);

-- name: migrate_11
-- Version 11: a task's priority is a signed 64-bit integer, as the API promises (it
-- was integer: a priority beyond 32 bits was accepted and then refused by the insert,
-- so the task was never stored). The table is rewritten once, under the migration lock.
ALTER TABLE ct_tasks ALTER COLUMN priority TYPE bigint;

-- name: migrate_12
-- Version 12: child tasks (docs/queue.md, "Child tasks"). A task enqueued by another
-- task (ctx.enqueue) keeps its parent's id in metadata["parent"], copied into
-- meta_parent so that the children of a task (listed on its page, stopped with it) are
-- found through ct_tasks_parent. Rows written before this version have no children:
-- their meta_parent stays NULL. Every statement may run again on a migrated schema.
ALTER TABLE ct_tasks ADD COLUMN IF NOT EXISTS meta_parent text;

CREATE INDEX IF NOT EXISTS ct_tasks_parent ON ct_tasks (meta_parent, created_at, seq)
    WHERE meta_parent IS NOT NULL;

-- name: migrate_13
-- Version 13: charts (docs/dashboard.md, "Charts"). Each transition keeps its instant
-- (occurred_at) and, when a chart counts it, its target status (charted: running,
-- succeeded, failed or lost, as chongming_task.stores._activity.CHARTED; NULL for the
-- others) as columns beside its document, written in the same statement.
-- ct_transitions_at orders the charted ones by status and instant (the others are not
-- in it, which spares most transitions an index write), so a chart of the last hour
-- or day counts index ranges and never reads the whole history. Rows written before this version keep NULL there and are not
-- charted (a chart spans a day at most: it fills in within a day).
ALTER TABLE ct_transitions ADD COLUMN IF NOT EXISTS occurred_at timestamptz;

ALTER TABLE ct_transitions ADD COLUMN IF NOT EXISTS charted text;

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
-- column goes. Every statement may run again on a migrated schema.
DROP INDEX IF EXISTS ct_commands_claim;

CREATE INDEX IF NOT EXISTS ct_commands_claim ON ct_commands (action, seq)
    WHERE status IN ('pending', 'claimed');

ALTER TABLE ct_commands DROP COLUMN IF EXISTS priority;

-- name: legacy_submissions
SELECT command_id, kind, target, action, target_owner, status, claimed_by, claim_token,
       lease_until, claims, completed_at, result::text, doc::text
FROM ct_commands c
WHERE kind = 'task' AND action = 'submit' AND status IN ('pending', 'claimed')
  AND NOT EXISTS (SELECT 1 FROM ct_tasks t WHERE t.task_id = c.target)
ORDER BY seq;

-- name: legacy_settle
UPDATE ct_commands SET status = 'completed', completed_at = %(now)s, lease_until = NULL,
    result = %(result)s::json
WHERE command_id = %(command_id)s;

-- name: migrate_15
-- Version 15: the work queue's waiting tasks (queued, held by nobody, enqueued with a
-- recipe) by bucket and age, for queue_health (chongming-task health, the dashboard's
-- overview, workers and buckets pages): the depth of each bucket is a count of this
-- partial index and its oldest task the first entry of its range, so nothing decodes a
-- queued task. Only those rows are in it; its condition reads the document (the recipe)
-- only for a queued unheld row: an enqueue and a claim, never another transition.
CREATE INDEX IF NOT EXISTS ct_tasks_waiting ON ct_tasks (bucket, created_at, seq)
    WHERE status = 'queued' AND owner IS NULL
      AND json_typeof(doc -> 'metadata' -> 'recipe') = 'object';

-- The name index carries each task's status and tags, so a count by name prefix (and
-- tag) is an index-only scan instead of a read of every matching row. A transition
-- writes a new entry in every index anyway (status is indexed: no HOT update), so the
-- wider entry costs no extra index write.
DROP INDEX IF EXISTS ct_tasks_name;

CREATE INDEX IF NOT EXISTS ct_tasks_name ON ct_tasks (name, created_at, seq)
    INCLUDE (status, tags);

-- The whole store's counts per status and per bucket (the overview, the unfiltered task
-- list, the buckets page, the live fingerprint) without a scan of every task: the
-- finished tasks (terminal statuses: almost all of a store's tasks) are counted by
-- triggers in the transaction that writes them, so those counts are exact at the
-- reader's snapshot; the unfinished ones are counted from their index ranges of
-- ct_tasks_status_created at read time (status_totals). A trigger fires only when a
-- task enters or leaves a terminal status (once in a task's usual life, at its end; a
-- retry), is inserted finished, or changes bucket while finished, and writes both its
-- counts in one statement; deletes are counted once per statement (a prune adds a row
-- per status and bucket). Rows are keyed by (kind, key): ('status', a terminal status)
-- and ('bucket', a bucket, '-1' for none). Each writing backend adds its deltas to rows
-- of its own (backend = pg_backend_pid()): a backend runs one transaction at a time, so
-- two writers never wait for, nor deadlock on, a counter row. Rows of backends that
-- have gone are folded into backend 0 (fold_counts).
CREATE TABLE IF NOT EXISTS ct_terminal_counts (
    backend integer NOT NULL,
    kind text NOT NULL,
    key text NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (backend, kind, key)
);

-- TG_ARGV[0]: 1 counts the new row in (an insert, entering a terminal status), -1 the
-- old row out (leaving one).
CREATE OR REPLACE FUNCTION ct_count_terminal() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    delta integer := TG_ARGV[0]::integer;
    counted ct_tasks;
BEGIN
    IF delta > 0 THEN counted := NEW; ELSE counted := OLD; END IF;
    INSERT INTO ct_terminal_counts AS c (backend, kind, key, n)
    VALUES (pg_backend_pid(), 'status', counted.status, delta),
           (pg_backend_pid(), 'bucket', coalesce(counted.bucket, -1)::text, delta)
    ON CONFLICT (backend, kind, key) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION ct_count_terminal_removed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO ct_terminal_counts AS c (backend, kind, key, n)
    SELECT pg_backend_pid(), 'status', status, -count(*) FROM ct_removed
    WHERE status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded') GROUP BY status
    UNION ALL
    SELECT pg_backend_pid(), 'bucket', coalesce(bucket, -1)::text, -count(*) FROM ct_removed
    WHERE status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded') GROUP BY coalesce(bucket, -1)
    ON CONFLICT (backend, kind, key) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION ct_count_terminal_emptied() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM ct_terminal_counts;
    RETURN NULL;
END $$;

-- No task is written while the counts start from the tasks there are (the lock is held
-- until this migration commits); run again, it counts them again.
LOCK TABLE ct_tasks IN SHARE ROW EXCLUSIVE MODE;

DELETE FROM ct_terminal_counts;

INSERT INTO ct_terminal_counts (backend, kind, key, n)
SELECT 0, 'status', status, count(*) FROM ct_tasks WHERE status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded') GROUP BY status
UNION ALL
SELECT 0, 'bucket', coalesce(bucket, -1)::text, count(*) FROM ct_tasks
WHERE status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded') GROUP BY coalesce(bucket, -1);

DROP TRIGGER IF EXISTS ct_tasks_count_insert ON ct_tasks;

CREATE TRIGGER ct_tasks_count_insert AFTER INSERT ON ct_tasks
FOR EACH ROW WHEN (NEW.status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded'))
EXECUTE FUNCTION ct_count_terminal('1');

DROP TRIGGER IF EXISTS ct_tasks_count_update ON ct_tasks;

DROP TRIGGER IF EXISTS ct_tasks_count_enter ON ct_tasks;

CREATE TRIGGER ct_tasks_count_enter AFTER UPDATE OF status, bucket ON ct_tasks
FOR EACH ROW WHEN (NEW.status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded') AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.bucket IS DISTINCT FROM NEW.bucket))
EXECUTE FUNCTION ct_count_terminal('1');

DROP TRIGGER IF EXISTS ct_tasks_count_leave ON ct_tasks;

CREATE TRIGGER ct_tasks_count_leave AFTER UPDATE OF status, bucket ON ct_tasks
FOR EACH ROW WHEN (OLD.status IN ('cancelled', 'failed', 'lost', 'skipped', 'stopped', 'succeeded') AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.bucket IS DISTINCT FROM NEW.bucket))
EXECUTE FUNCTION ct_count_terminal('-1');

DROP TRIGGER IF EXISTS ct_tasks_count_delete ON ct_tasks;

CREATE TRIGGER ct_tasks_count_delete AFTER DELETE ON ct_tasks
REFERENCING OLD TABLE AS ct_removed FOR EACH STATEMENT
EXECUTE FUNCTION ct_count_terminal_removed();

DROP TRIGGER IF EXISTS ct_tasks_count_truncate ON ct_tasks;

CREATE TRIGGER ct_tasks_count_truncate AFTER TRUNCATE ON ct_tasks
FOR EACH STATEMENT EXECUTE FUNCTION ct_count_terminal_emptied();

-- name: schema_exists
SELECT count(*) FROM (SELECT to_regclass('ct_meta') AS t) r WHERE r.t IS NOT NULL;

-- name: schema_version
SELECT value FROM ct_meta WHERE key = 'schema_version';

-- name: set_schema_version
INSERT INTO ct_meta (key, value) VALUES ('schema_version', %(version)s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- name: migration_lock
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.chongming_task.schema'));

-- name: current_schema
SELECT current_schema();

-- name: insert_task
WITH task AS (
    INSERT INTO ct_tasks (
        task_id, name, status, status_version, created_at, updated_at, priority, bucket,
        owner, meta_schedule, meta_pipeline, tags, progress, heartbeat_at, lease_owner,
        lease_until, pid, doc, checkpoint_gaps, meta_parent
    ) VALUES (
        %(task_id)s, %(name)s, %(status)s, %(status_version)s, %(created_at)s,
        %(updated_at)s, %(priority)s, %(bucket)s, %(owner)s, %(meta_schedule)s,
        %(meta_pipeline)s, %(tags)s, %(progress)s::json, %(heartbeat_at)s,
        %(lease_owner)s, %(lease_until)s, %(pid)s, %(doc)s::json, %(checkpoint_gaps)s::json,
        %(meta_parent)s
    )
    RETURNING task_id
), history AS (
    INSERT INTO ct_transitions (task_id, version, doc, occurred_at, charted)
    SELECT e ->> 'task_id', (e ->> 'version')::bigint, e,
        (e ->> 'at')::timestamptz, CASE WHEN e ->> 'to' IN ('running', 'succeeded', 'failed', 'lost') THEN e ->> 'to' END
    FROM task, json_array_elements(%(transitions)s::json) AS e
    ON CONFLICT DO NOTHING
)
-- %(wake)s: a task that waits queued wakes the workers in the same statement (the
-- NOTIFY is sent when it commits), not in a round trip of its own.
SELECT pg_notify(%(channel)s, 'queue') FROM task WHERE %(wake)s;

-- name: update_task
WITH task AS (
    UPDATE ct_tasks SET
        name = %(name)s, status = %(status)s, status_version = %(status_version)s,
        created_at = %(created_at)s, updated_at = %(updated_at)s, priority = %(priority)s,
        bucket = %(bucket)s, owner = %(owner)s, meta_schedule = %(meta_schedule)s,
        meta_pipeline = %(meta_pipeline)s, tags = %(tags)s, progress = %(progress)s::json,
        heartbeat_at = %(heartbeat_at)s, lease_owner = %(lease_owner)s,
        lease_until = %(lease_until)s, pid = %(pid)s, doc = %(doc)s::json,
    checkpoint_gaps = %(checkpoint_gaps)s::json, meta_parent = %(meta_parent)s
    WHERE task_id = %(task_id)s AND status_version = %(expect_version)s
    RETURNING task_id
), history AS (
    INSERT INTO ct_transitions (task_id, version, doc, occurred_at, charted)
    SELECT e ->> 'task_id', (e ->> 'version')::bigint, e,
    (e ->> 'at')::timestamptz, CASE WHEN e ->> 'to' IN ('running', 'succeeded', 'failed', 'lost') THEN e ->> 'to' END
    FROM task, json_array_elements(%(transitions)s::json) AS e
    ON CONFLICT DO NOTHING
)
SELECT count(*) FROM task;

-- name: task_version
SELECT status_version FROM ct_tasks WHERE task_id = %(task_id)s;

-- name: insert_transition
INSERT INTO ct_transitions (task_id, version, doc, occurred_at, charted)
SELECT %(task_id)s, %(version)s, e, (e ->> 'at')::timestamptz,
    CASE WHEN e ->> 'to' IN ('running', 'succeeded', 'failed', 'lost') THEN e ->> 'to' END
FROM (SELECT %(doc)s::json AS e) AS d
ON CONFLICT DO NOTHING;

-- name: select_task
SELECT doc::text, progress::text, heartbeat_at, lease_owner, lease_until, pid, task_id,
  checkpoint_gaps::text
FROM ct_tasks WHERE task_id = %(task_id)s;

-- name: select_tasks
SELECT t.doc::text, t.progress::text, t.heartbeat_at, t.lease_owner, t.lease_until, t.pid,
  t.task_id, t.checkpoint_gaps::text
FROM ct_tasks t

-- name: select_heads
SELECT t.task_id, t.status, t.status_version FROM ct_tasks t

-- name: count_tasks
SELECT t.status, count(*) FROM ct_tasks t

-- name: count_all
SELECT count(*) FROM ct_tasks t

-- name: status_totals
-- count_by_status of the whole store: the finished tasks' trigger-kept counts (migrate_15)
-- and how many counter rows were summed (many: time to fold those of gone backends),
-- then every other status counted in its range of ct_tasks_status_created (index-only
-- scans of as many entries as there are unfinished tasks), in one snapshot. The ranges
-- lie between the terminal statuses, so a status the library does not know is counted
-- too (and refused as corrupt by the reader).
SELECT key, sum(n), count(*) FROM ct_terminal_counts WHERE kind = 'status' GROUP BY key
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
-- tasks' (found in the same ranges of the status index, their rows read for the bucket).
SELECT key::integer, sum(n), count(*) FROM ct_terminal_counts
WHERE kind = 'bucket' AND key <> '-1' GROUP BY key
UNION ALL
SELECT bucket, count(*), 0 FROM ct_tasks
WHERE bucket IS NOT NULL AND (status < 'cancelled'
    OR (status > 'cancelled' AND status < 'failed') OR (status > 'failed' AND status < 'lost')
    OR (status > 'lost' AND status < 'skipped') OR (status > 'skipped' AND status < 'stopped')
    OR (status > 'stopped' AND status < 'succeeded') OR status > 'succeeded')
GROUP BY bucket

-- name: fold_lock
-- One folder at a time (fold_counts): two folds adding into the same rows of backend 0
-- in different orders could deadlock.
SELECT pg_try_advisory_xact_lock(hashtext(current_schema() || '.chongming_task.fold'))

-- name: fold_counts
-- The counter rows of backends that have gone, added into backend 0's. A row a live
-- transaction holds (a new backend that was given a gone one's pid) is skipped (SKIP
-- LOCKED): a fold never waits for a writer.
WITH gone AS (
    DELETE FROM ct_terminal_counts c
    WHERE c.ctid IN (
        SELECT g.ctid FROM ct_terminal_counts g
        WHERE g.backend <> 0 AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = g.backend)
        FOR UPDATE SKIP LOCKED)
    RETURNING c.kind, c.key, c.n
)
INSERT INTO ct_terminal_counts AS c (backend, kind, key, n)
SELECT 0, kind, key, sum(n) FROM gone GROUP BY kind, key
ON CONFLICT (backend, kind, key) DO UPDATE SET n = c.n + excluded.n

-- name: count_buckets
SELECT bucket, count(*) FROM ct_tasks WHERE bucket IS NOT NULL GROUP BY bucket;

-- name: filter_status
t.status = %(status)s

-- name: filter_statuses
t.status = ANY(%(statuses)s)

-- name: filter_name_range
(t.name >= %(name_low)s AND t.name < %(name_high)s)

-- name: filter_name_from
t.name >= %(name_low)s

-- name: filter_id_range
(t.task_id >= %(id_low)s AND t.task_id < %(id_high)s)

-- name: filter_id_from
t.task_id >= %(id_low)s

-- name: filter_id_after
t.task_id > %(id_after)s

-- name: filter_argument
((json_typeof(t.doc -> 'metadata' -> 'recipe' -> 'args') = 'array'
  AND strpos((t.doc -> 'metadata' -> 'recipe' -> 'args')::text, %(argument)s) > 0)
 OR (json_typeof(t.doc -> 'metadata' -> 'recipe' -> 'kwargs') = 'object'
  AND strpos((t.doc -> 'metadata' -> 'recipe' -> 'kwargs')::text, %(argument)s) > 0))

-- name: filter_tag
t.tags @> ARRAY[%(tag)s]::text[]

-- name: filter_bucket
t.bucket = %(bucket)s

-- name: filter_buckets
t.bucket = ANY(%(buckets)s)

-- name: filter_owner
t.owner = %(owner)s

-- name: filter_owned
t.owner IS NOT NULL

-- name: filter_unowned
t.owner IS NULL

-- name: filter_meta_schedule
t.meta_schedule = %(meta_schedule)s

-- name: filter_meta_pipeline
t.meta_pipeline = %(meta_pipeline)s

-- name: filter_meta_parent
t.meta_parent = %(meta_parent)s

-- name: filter_task_ids
t.task_id = ANY(%(task_ids)s)

-- name: filter_created_after
t.created_at >= %(created_after)s

-- name: filter_created_before
t.created_at < %(created_before)s

-- name: filter_updated_after
t.updated_at >= %(updated_after)s

-- name: filter_updated_before
t.updated_at < %(updated_before)s

-- name: filter_lease_expired
-- lease_until is the ISO text of an aware datetime in the offset it was written with.
-- timestamptz reads every offset Python writes except one with microseconds
-- ("+00:00:00.000001"), which is taken apart by hand: local time minus the offset.
(t.lease_until IS NULL OR CASE
    WHEN t.lease_until ~ '[+-]\d\d:\d\d:\d\d\.\d{6}$'
    THEN left(t.lease_until, -16)::timestamp - right(t.lease_until, 16)::interval
        <= (%(lease_cutoff_at)s::timestamptz AT TIME ZONE 'UTC')
    ELSE t.lease_until::timestamptz <= %(lease_cutoff_at)s::timestamptz
END)

-- name: filter_meta_key
(json_typeof(t.doc -> 'metadata' -> %(meta_key_{i})s) = 'string'
 AND t.doc -> 'metadata' ->> %(meta_key_{i})s = %(meta_value_{i})s)

-- name: limit
LIMIT %(limit)s

-- name: prune_history
DELETE FROM ct_transitions WHERE task_id IN (
    SELECT task_id FROM ct_tasks WHERE status = ANY(%(terminal)s)
    ORDER BY updated_at DESC, seq DESC OFFSET %(keep)s
);

-- name: prune_tasks
DELETE FROM ct_tasks WHERE seq IN (
    SELECT seq FROM ct_tasks WHERE status = ANY(%(terminal)s)
    ORDER BY updated_at DESC, seq DESC OFFSET %(keep)s
);

-- name: delete_history_of
DELETE FROM ct_transitions WHERE task_id = ANY(%(task_ids)s);

-- name: delete_tasks_by_id
DELETE FROM ct_tasks WHERE task_id = ANY(%(task_ids)s);

-- name: delete_transitions
DELETE FROM ct_transitions WHERE task_id = %(task_id)s AND version = ANY(%(versions)s);

-- name: select_history
SELECT doc::text FROM ct_transitions WHERE task_id = %(task_id)s ORDER BY version;

-- name: touch_task
UPDATE ct_tasks SET
    progress = COALESCE(%(progress)s::json, progress),
    heartbeat_at = COALESCE(%(heartbeat_at)s, heartbeat_at),
    lease_owner = COALESCE(%(lease_owner)s, lease_owner),
    lease_until = COALESCE(%(lease_until)s, lease_until),
    pid = COALESCE(%(pid)s, pid),
    checkpoint_gaps = COALESCE(%(checkpoint_gaps)s::json, checkpoint_gaps)
WHERE task_id = %(task_id)s;

-- name: renew_leases
UPDATE ct_tasks SET lease_until = %(lease_until)s
WHERE lease_owner = %(owner)s AND task_id = ANY(%(task_ids)s);

-- name: insert_command
WITH inserted AS (
    INSERT INTO ct_commands (
        command_id, kind, target, action, target_owner, status, claims, doc
    ) VALUES (
        %(command_id)s, %(kind)s, %(target)s, %(action)s, %(target_owner)s, 'pending', 0,
        %(doc)s::json
    ) ON CONFLICT (command_id) DO NOTHING
    RETURNING command_id
)
SELECT pg_notify(%(channel)s, command_id) FROM inserted;

-- name: select_command
SELECT command_id, kind, target, action, target_owner, status, claimed_by, claim_token,
       lease_until, claims, completed_at, result::text, doc::text
FROM ct_commands WHERE command_id = %(command_id)s;

-- name: claim_commands
-- Oldest first: RETURNING has no order, so the store sorts the claimed rows by seq.
UPDATE ct_commands c SET
    status = 'claimed', claimed_by = %(owner)s,
    claim_token = replace(gen_random_uuid()::text, '-', ''),
    lease_until = %(lease_until)s, claims = c.claims + 1
FROM (
    SELECT seq FROM ct_commands
    WHERE status IN ('pending', 'claimed')
      AND (status = 'pending' OR lease_until <= %(now)s)
      AND (target_owner = %(owner)s OR target_owner IS NULL)
      AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
    ORDER BY seq LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) AS picked
WHERE c.seq = picked.seq
RETURNING c.seq, c.command_id, c.kind, c.target, c.action, c.target_owner, c.status,
          c.claimed_by, c.claim_token, c.lease_until, c.claims, c.completed_at, c.result::text,
          c.doc::text;

-- name: claim_commands_actions
-- claim_commands for the actions a claimer handles: searched by (action, seq) over the
-- claimable rows.
-- The same statement with one more line: an "IS NULL OR" on that line, shared with
-- claim_commands, would keep the planner off the index.
UPDATE ct_commands c SET
    status = 'claimed', claimed_by = %(owner)s,
    claim_token = replace(gen_random_uuid()::text, '-', ''),
    lease_until = %(lease_until)s, claims = c.claims + 1
FROM (
    SELECT seq FROM ct_commands
    WHERE status IN ('pending', 'claimed')
      AND (status = 'pending' OR lease_until <= %(now)s)
      AND (target_owner = %(owner)s OR target_owner IS NULL)
      AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
      AND action = ANY(%(actions)s::text[])
    ORDER BY seq LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) AS picked
WHERE c.seq = picked.seq
RETURNING c.seq, c.command_id, c.kind, c.target, c.action, c.target_owner, c.status,
          c.claimed_by, c.claim_token, c.lease_until, c.claims, c.completed_at, c.result::text,
          c.doc::text;

-- name: complete_command
UPDATE ct_commands SET status = 'completed', completed_at = %(now)s, lease_until = NULL,
    result = %(result)s::json
WHERE command_id = %(command_id)s AND claim_token = %(claim_token)s AND status = 'claimed';

-- name: release_command
WITH released AS (
    UPDATE ct_commands SET status = 'pending', claimed_by = NULL, claim_token = NULL,
        lease_until = NULL
    WHERE command_id = %(command_id)s AND claim_token = %(claim_token)s
      AND status = 'claimed'
    RETURNING command_id
)
SELECT pg_notify(%(channel)s, command_id) FROM released;

-- name: extend_command
UPDATE ct_commands SET lease_until = %(lease_until)s
WHERE command_id = %(command_id)s AND claim_token = %(claim_token)s AND status = 'claimed';

-- name: insert_schedule
INSERT INTO ct_schedules (name, revision, updated_at, data)
VALUES (%(name)s, 1, %(updated_at)s, %(data)s::json)
ON CONFLICT (name) DO NOTHING;

-- name: update_schedule
UPDATE ct_schedules SET revision = revision + 1, updated_at = %(updated_at)s,
    data = %(data)s::json
WHERE name = %(name)s AND revision = %(expect_revision)s;

-- name: select_schedule
SELECT name, revision, updated_at, data::text FROM ct_schedules WHERE name = %(name)s;

-- name: select_schedules
SELECT name, revision, updated_at, data::text FROM ct_schedules ORDER BY name;

-- name: delete_schedule
DELETE FROM ct_schedules WHERE name = %(name)s;

-- name: claim_firing
INSERT INTO ct_firings (schedule, scheduled_at, owner, task_id, claimed_at)
VALUES (%(schedule)s, %(scheduled_at)s, %(owner)s, %(task_id)s, %(now)s)
ON CONFLICT (schedule, scheduled_at) DO NOTHING;

-- name: prune_firings
DELETE FROM ct_firings WHERE scheduled_at < %(before)s;

-- name: update_task_unheld
-- update_task, only while nobody holds the task (a queued task a worker has not
-- claimed): a stop or pause from any process races a claim and exactly one wins.
WITH task AS (
    UPDATE ct_tasks SET
        name = %(name)s, status = %(status)s, status_version = %(status_version)s,
        created_at = %(created_at)s, updated_at = %(updated_at)s, priority = %(priority)s,
        bucket = %(bucket)s, owner = %(owner)s, meta_schedule = %(meta_schedule)s,
        meta_pipeline = %(meta_pipeline)s, tags = %(tags)s, progress = %(progress)s::json,
        heartbeat_at = %(heartbeat_at)s, lease_owner = %(lease_owner)s,
        lease_until = %(lease_until)s, pid = %(pid)s, doc = %(doc)s::json,
    checkpoint_gaps = %(checkpoint_gaps)s::json, meta_parent = %(meta_parent)s
    WHERE task_id = %(task_id)s AND status_version = %(expect_version)s AND owner IS NULL
    RETURNING task_id
), history AS (
    INSERT INTO ct_transitions (task_id, version, doc, occurred_at, charted)
    SELECT e ->> 'task_id', (e ->> 'version')::bigint, e,
    (e ->> 'at')::timestamptz, CASE WHEN e ->> 'to' IN ('running', 'succeeded', 'failed', 'lost') THEN e ->> 'to' END
    FROM task, json_array_elements(%(transitions)s::json) AS e
    ON CONFLICT DO NOTHING
)
SELECT count(*) FROM task;

-- name: claim_queued
-- limited: whether any fleet limit is declared, read by the claim's first statement
-- (without one, the claim reads no limits; with one, it counts their use and reads
-- again with the full keys left out).
-- %(full)s: the limit keys with no room (tags or concurrency keys); their tasks are
-- passed over.
-- The tasks of a paused queue (a row of ct_queue_pauses naming their task name or
-- their bucket) are passed over too: a pause is obeyed by the statement that claims.
SELECT t.doc::text, t.progress::text, t.heartbeat_at, t.lease_owner, t.lease_until, t.pid,
  t.task_id, t.checkpoint_gaps::text, EXISTS (SELECT 1 FROM ct_limits) AS limited
FROM ct_tasks t WHERE t.status = 'queued' AND t.owner IS NULL
    AND json_typeof(t.doc->'metadata'->'recipe') = 'object'
    AND (t.doc->'metadata'->'recipe'->>'not_before' IS NULL OR (CASE
        WHEN t.doc->'metadata'->'recipe'->>'not_before' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)$'
        THEN (t.doc->'metadata'->'recipe'->>'not_before')::timestamptz END) <= %(now)s::timestamptz)
    AND NOT (t.tags && %(full)s::text[])
    AND coalesce(t.doc->'metadata'->'recipe'->>'concurrency_key', '') <> ALL(%(full)s::text[])
    AND NOT EXISTS (SELECT 1 FROM ct_queue_pauses p WHERE p.name = t.name OR p.bucket = t.bucket)
ORDER BY t.priority DESC, t.created_at, t.seq LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: claim_queued_buckets
SELECT t.doc::text, t.progress::text, t.heartbeat_at, t.lease_owner, t.lease_until, t.pid,
  t.task_id, t.checkpoint_gaps::text, EXISTS (SELECT 1 FROM ct_limits) AS limited
FROM ct_tasks t WHERE t.status = 'queued' AND t.owner IS NULL
    AND json_typeof(t.doc->'metadata'->'recipe') = 'object'
    AND (t.doc->'metadata'->'recipe'->>'not_before' IS NULL OR (CASE
        WHEN t.doc->'metadata'->'recipe'->>'not_before' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)$'
        THEN (t.doc->'metadata'->'recipe'->>'not_before')::timestamptz END) <= %(now)s::timestamptz)
    AND t.bucket = ANY(%(buckets)s) AND NOT (t.tags && %(full)s::text[])
    AND coalesce(t.doc->'metadata'->'recipe'->>'concurrency_key', '') <> ALL(%(full)s::text[])
    AND NOT EXISTS (SELECT 1 FROM ct_queue_pauses p WHERE p.name = t.name OR p.bucket = t.bucket)
ORDER BY t.priority DESC, t.created_at, t.seq LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: lock_slots
-- Serialises the claims that take global slots (count, then insert) across every
-- process: a transaction-level advisory lock, released at COMMIT.
SELECT pg_advisory_xact_lock(%(key)s);

-- name: purge_slots
DELETE FROM ct_slots WHERE lease_until <= %(now)s;

-- name: count_slots
SELECT name, count(*) FROM ct_slots WHERE lease_until > %(now)s GROUP BY name;

-- name: insert_slot
INSERT INTO ct_slots (name, task_id, owner, acquired_at, lease_until)
VALUES (%(name)s, %(task_id)s, %(owner)s, %(now)s, %(lease_until)s)
ON CONFLICT (name, task_id) DO UPDATE SET
    owner = excluded.owner, acquired_at = excluded.acquired_at,
    lease_until = excluded.lease_until;

-- name: renew_slots
UPDATE ct_slots SET lease_until = %(slot_until)s
WHERE owner = %(owner)s AND task_id = ANY(%(task_ids)s);

-- name: release_slots
DELETE FROM ct_slots WHERE task_id = %(task_id)s AND owner = %(owner)s;

-- name: select_slots
SELECT name, task_id, owner, acquired_at, lease_until FROM ct_slots
ORDER BY name, acquired_at, task_id;

-- name: purge_starts
DELETE FROM ct_limit_starts WHERE expires_at <= %(now)s;

-- name: count_starts
SELECT key, count(*) FROM ct_limit_starts WHERE expires_at > %(now)s GROUP BY key;

-- name: insert_start
INSERT INTO ct_limit_starts (key, task_id, started_at, expires_at)
VALUES (%(key)s, %(task_id)s, %(now)s, %(expires_at)s)
ON CONFLICT DO NOTHING;

-- name: select_starts
SELECT key, task_id, started_at, expires_at FROM ct_limit_starts
ORDER BY started_at, key, task_id;

-- name: select_limits
SELECT key, concurrency, rate FROM ct_limits ORDER BY key;

-- name: upsert_limit
INSERT INTO ct_limits (key, concurrency, rate, updated_at)
VALUES (%(key)s, %(concurrency)s, %(rate)s, %(now)s)
ON CONFLICT (key) DO UPDATE SET
    concurrency = excluded.concurrency, rate = excluded.rate, updated_at = excluded.updated_at;

-- name: delete_limit
DELETE FROM ct_limits WHERE key = %(key)s;

-- name: upsert_pause
INSERT INTO ct_queue_pauses (scope, name, bucket, actor, reason, paused_at)
VALUES (%(scope)s, %(name)s, %(bucket)s, %(actor)s, %(reason)s, %(paused_at)s)
ON CONFLICT (scope) DO UPDATE SET
    actor = excluded.actor, reason = excluded.reason, paused_at = excluded.paused_at;

-- name: delete_pause
DELETE FROM ct_queue_pauses WHERE scope = %(scope)s
RETURNING name, bucket, actor, reason, paused_at;

-- name: select_pauses
SELECT name, bucket, actor, reason, paused_at FROM ct_queue_pauses ORDER BY scope;

-- name: notify_work
SELECT pg_notify(%(channel)s, 'queue');

-- name: database_identity
-- Which server (its start time) and database a connection is on, and its search_path:
-- enqueue(connection=...) compares the first two with the store's and restores the
-- third after running the store's statements in the caller's transaction.
SELECT current_database(), pg_postmaster_start_time(), current_setting('search_path');

-- name: set_search_path
-- For the rest of the current transaction only (is_local), like SET LOCAL.
SELECT set_config('search_path', %(search_path)s, true);

-- name: upsert_worker
INSERT INTO ct_workers (worker_id, heartbeat_at, doc)
VALUES (%(worker_id)s, %(heartbeat_at)s, %(doc)s::json)
ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, doc = excluded.doc;

-- name: select_workers
SELECT doc::text FROM ct_workers ORDER BY worker_id;

-- name: delete_worker
DELETE FROM ct_workers WHERE worker_id = %(worker_id)s;

-- name: unique_lock
-- Serialises the enqueues of one unique key in this schema until the transaction ends,
-- so the read of the standing task and the insert are one step (READ COMMITTED alone
-- would let two transactions both read "none" and the loser fail on the index).
SELECT pg_advisory_xact_lock(
    hashtext(current_schema() || '.chongming_task.unique'), hashtext(%(unique_key)s)
);

-- name: pipeline_lock
-- Serialises the transactions that settle nodes of one fleet pipeline run (taken
-- before their first write), so a node's join rule is judged on every upstream
-- node's committed state and two settling transactions never lock each other's rows.
SELECT pg_advisory_xact_lock(
    hashtext(current_schema() || '.chongming_task.pipeline'), hashtext(%(run)s)
);

-- name: unique_standing
-- The tasks of a key that may stand: unfinished, or updated since the window opened
-- (a task's updated_at is never before its finished_at); the caller checks finished_at.
SELECT task_id, status, doc ->> 'finished_at' FROM ct_tasks
WHERE unique_key = %(unique_key)s
  AND (status <> ALL(%(terminal)s) OR updated_at >= %(finished_since)s)
ORDER BY seq DESC;

-- name: set_unique_key
UPDATE ct_tasks SET unique_key = %(unique_key)s WHERE task_id = %(task_id)s;

-- name: chart_transitions
-- The charts' counts (docs/dashboard.md, "Charts"): per slot k of %(step)s from
-- %(since)s and per charted status, the transitions into it, each a range count of the
-- index ct_transitions_at (charted, occurred_at): the same index entries one GROUP BY
-- over the window would read, and no aggregate of every transition of it.
SELECT k, s, (
    SELECT count(*) FROM ct_transitions
    WHERE charted = s
      AND occurred_at >= %(since)s + k * %(step)s AND occurred_at < %(since)s + (k + 1) * %(step)s)
FROM generate_series(0, %(slots)s - 1) AS k, unnest(%(statuses)s::text[]) AS s;

-- name: chart_durations
-- The charts' durations: the most recent %(sample)s tasks that finished (succeeded or
-- failed) in the window, newest first, through ct_tasks_updated (a finished task's
-- updated_at is its finish time or later); the caller keeps those that finished inside.
SELECT name, doc ->> 'started_at', doc ->> 'finished_at', status
FROM ct_tasks
WHERE updated_at >= %(since)s AND status IN ('succeeded', 'failed')
ORDER BY updated_at DESC LIMIT %(sample)s;

-- name: chart_queued
-- Queue depth per task bucket: queued tasks nobody holds (NULL: no bucket), counted in
-- the partial index ct_tasks_queued_bucket.
SELECT bucket, count(*) FROM ct_tasks WHERE status = 'queued' AND owner IS NULL
GROUP BY bucket;

-- name: waiting_work
-- The work queue's waiting tasks per bucket (TaskRecordStore.waiting_work): the depth
-- counted in the partial index ct_tasks_waiting (an index-only scan), then, per
-- bucket, the queued_at of the oldest task by creation, the first entry of the
-- bucket's range (one row read per bucket; NULL: the tasks without a bucket).
SELECT w.bucket, w.depth, o.since FROM (
    SELECT bucket, count(*) AS depth FROM ct_tasks
    WHERE status = 'queued' AND owner IS NULL
      AND json_typeof(doc -> 'metadata' -> 'recipe') = 'object'
    GROUP BY bucket
) w
LEFT JOIN LATERAL (
    (SELECT coalesce(t.doc ->> 'queued_at', t.doc ->> 'created_at') AS since FROM ct_tasks t
     WHERE t.status = 'queued' AND t.owner IS NULL
       AND json_typeof(t.doc -> 'metadata' -> 'recipe') = 'object' AND t.bucket = w.bucket
     ORDER BY t.created_at, t.seq LIMIT 1)
    UNION ALL
    (SELECT coalesce(t.doc ->> 'queued_at', t.doc ->> 'created_at') FROM ct_tasks t
     WHERE t.status = 'queued' AND t.owner IS NULL
       AND json_typeof(t.doc -> 'metadata' -> 'recipe') = 'object' AND t.bucket IS NULL
       AND w.bucket IS NULL
     ORDER BY t.created_at, t.seq LIMIT 1)
) o ON true;

-- name: name_gaps
-- The checkpoint gaps of a task name's most recently created runs
-- (TaskRecordStore.checkpoint_gaps_of): a backward walk of the exact name's range of
-- ct_tasks_name, limit rows, the gaps column only (NULL: a run without checkpoints).
SELECT task_id, checkpoint_gaps::text FROM ct_tasks WHERE name = %(name)s
ORDER BY created_at DESC, seq DESC LIMIT %(limit)s;
