"""Schema migrations, applied in order and recorded in `schema_migrations`.

Each migration is `(name, sql)`. Never edit a migration that has shipped: add a
new one at the end of its area's list. Areas keep separate lists so that the
memory model and the branching engine can grow their own tables.
"""

from __future__ import annotations

import sqlite3
import time

Migration = tuple[str, str]

# The (at most) two records written just before `new` in its thread, for the
# thread-context trigger. Looks back over the thread's last 16 writes only, so a
# write costs the same however long the session is and whatever kinds interleave.
_THREAD_PREVIOUS = """
    SELECT seq FROM (
        SELECT seq FROM (
            SELECT seq, kind, branch, version, op, text FROM records
            WHERE new.session_id IS NOT NULL AND session_id = new.session_id AND seq < new.seq
            ORDER BY seq DESC LIMIT 16)
        WHERE kind = new.kind AND branch = new.branch AND version = 1 AND op = 'put' AND text != ''
        LIMIT 2)
    UNION ALL
    SELECT seq FROM (
        SELECT seq FROM (
            SELECT seq, kind, branch, version, op, text FROM records
            WHERE new.session_id IS NULL AND user_id = new.user_id AND seq < new.seq
            ORDER BY seq DESC LIMIT 16)
        WHERE kind = new.kind AND branch = new.branch AND version = 1 AND op = 'put' AND text != ''
        LIMIT 2)
"""

CORE: list[Migration] = [
    (
        "0001_records",
        """
        -- Every memory of every kind, append-only. `seq` is the one global write
        -- sequence: each version of a record is a new row with a new seq; an
        -- update supersedes, a delete writes a tombstone (op = 'delete').
        CREATE TABLE records (
            seq          INTEGER PRIMARY KEY AUTOINCREMENT,
            id           TEXT NOT NULL,        -- logical id, stable across versions
            version      INTEGER NOT NULL,
            kind         TEXT NOT NULL,        -- memory|observation|prompt|summary|event|fact|identity|relation|operation
            layer        TEXT,                 -- identity_schema|event_log|verified_fact|operational_knowledge
            op           TEXT NOT NULL DEFAULT 'put' CHECK (op IN ('put', 'delete')),
            status       TEXT NOT NULL DEFAULT 'active',  -- active|pending|rejected|archived|...
            branch       TEXT NOT NULL DEFAULT 'main',
            project      TEXT NOT NULL DEFAULT '',
            user_id      TEXT,
            agent_id     TEXT,
            run_id       TEXT,
            session_id   TEXT,
            type         TEXT,                 -- observation type, fact category, ...
            title        TEXT,
            text         TEXT NOT NULL DEFAULT '',  -- what is searched and embedded
            data         TEXT NOT NULL DEFAULT '{}', -- kind-specific JSON
            metadata     TEXT NOT NULL DEFAULT '{}', -- caller's metadata JSON
            confidence   REAL,
            fact_key     TEXT,                 -- normalised subject, for conflict detection
            happened_at  REAL NOT NULL,        -- when it happened (epoch seconds)
            created_at   REAL NOT NULL,        -- when this version was stored
            actor        TEXT,                 -- who wrote this version
            reason       TEXT,                 -- why (ADD, UPDATE, merge, ...)
            source_id    TEXT,                 -- provenance: inbox event, event id, ...
            tool_use_id  TEXT,
            content_hash TEXT
        );
        CREATE INDEX records_by_id ON records(id, seq);
        CREATE INDEX records_by_project ON records(project, kind, seq);
        CREATE INDEX records_by_session ON records(session_id, seq);
        CREATE INDEX records_by_user ON records(user_id, seq);
        CREATE INDEX records_by_branch ON records(branch, seq);
        CREATE INDEX records_by_time ON records(created_at);
        CREATE INDEX records_by_fact_key ON records(fact_key) WHERE fact_key IS NOT NULL;
        CREATE INDEX records_by_tool_use ON records(tool_use_id) WHERE tool_use_id IS NOT NULL;

        -- Lexical index over the text of every stored version.
        CREATE VIRTUAL TABLE records_fts USING fts5(
            text, title, content='records', content_rowid='seq',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER records_fts_insert AFTER INSERT ON records
        WHEN new.op = 'put' AND new.text != '' BEGIN
            INSERT INTO records_fts(rowid, text, title) VALUES (new.seq, new.text, coalesce(new.title, ''));
        END;

        -- Versions whose embeddings are not in the vector store yet. Written in
        -- the same transaction as the record, so a crash never loses one.
        CREATE TABLE pending_vectors (seq INTEGER PRIMARY KEY);
        CREATE TRIGGER records_pending_vector AFTER INSERT ON records
        WHEN new.op = 'put' AND new.text != '' BEGIN
            INSERT INTO pending_vectors(seq) VALUES (new.seq);
        END;

        -- Branches: reading B sees B's rows plus each ancestor's rows up to the fork.
        CREATE TABLE branches (
            name        TEXT PRIMARY KEY,
            parent      TEXT REFERENCES branches(name),
            fork_seq    INTEGER,               -- parent's rows with seq <= fork_seq are visible
            status      TEXT NOT NULL DEFAULT 'active',  -- active|merged|archived
            description TEXT NOT NULL DEFAULT '',
            created_at  REAL NOT NULL,
            created_by  TEXT,
            merged_at   REAL,
            archived_at REAL,
            metadata    TEXT NOT NULL DEFAULT '{}'
        );
        INSERT INTO branches(name, parent, fork_seq, created_at, created_by, description)
        VALUES ('main', NULL, NULL, strftime('%s','now'), 'system', 'The default branch');

        -- A snapshot names (branch, seq); any read can take it as `as_of`.
        CREATE TABLE snapshots (
            name        TEXT PRIMARY KEY,
            branch      TEXT NOT NULL REFERENCES branches(name),
            seq         INTEGER NOT NULL,
            created_at  REAL NOT NULL,
            created_by  TEXT,
            description TEXT NOT NULL DEFAULT ''
        );
        """,
    ),
    (
        "0002_capture",
        """
        -- The durable inbox: a hook event is acknowledged only once it is here.
        CREATE TABLE inbox (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            dedup_key    TEXT NOT NULL UNIQUE,  -- tool_use_id, hook-sent event id or content hash
            event        TEXT NOT NULL,         -- hook_event_name
            session_id   TEXT,
            payload      TEXT NOT NULL,
            received_at  REAL NOT NULL,
            status       TEXT NOT NULL DEFAULT 'pending',  -- pending|done|failed
            attempts     INTEGER NOT NULL DEFAULT 0,
            next_attempt REAL NOT NULL DEFAULT 0,
            error        TEXT,
            processed_at REAL,
            branch       TEXT,
            agent_id     TEXT
        );
        CREATE INDEX inbox_pending ON inbox(status, id);

        CREATE TABLE sessions (
            session_id      TEXT PRIMARY KEY,
            project         TEXT NOT NULL DEFAULT '',
            cwd             TEXT,
            branch          TEXT NOT NULL DEFAULT 'main',
            agent_id        TEXT,
            parent_session  TEXT,
            transcript_path TEXT,
            source          TEXT,
            status          TEXT NOT NULL DEFAULT 'active',  -- active|ended
            started_at      REAL NOT NULL,
            last_seen_at    REAL NOT NULL,
            ended_at        REAL,
            end_reason      TEXT,
            prompt_count    INTEGER NOT NULL DEFAULT 0,
            tool_count      INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX sessions_by_project ON sessions(project, started_at);

        -- Claude token spend per day, for the daily budget.
        CREATE TABLE llm_usage (
            day           TEXT PRIMARY KEY,
            input_tokens  INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            calls         INTEGER NOT NULL DEFAULT 0
        );
        """,
    ),
    (
        "0003_thread_context_fts",
        f"""
        -- The keyword index search ranks with: each record's own words plus, in a
        -- low-weight `context` column, the words of its neighbours in its thread
        -- (the two records before and the two after it, same session (else same
        -- user), kind and branch). An answer often sits a turn away from the
        -- question's words, and BM25 over own + neighbours' words finds it where
        -- scoring each turn alone cannot (see team/retrieval-notes.md, session 2).
        -- A regular FTS5 table (it keeps its own copy of the text) because a
        -- record's context grows when the next records of its thread arrive.
        -- Only first versions form the thread; a later version keeps the context
        -- of the version it replaces. Each neighbour adds at most 200 characters.
        CREATE VIRTUAL TABLE records_thread_fts USING fts5(
            text, title, context,
            tokenize='porter unicode61 remove_diacritics 2'
        );

        -- What is already stored: neighbours found with window functions.
        INSERT INTO records_thread_fts(rowid, text, title, context)
        SELECT seq, text, title, CASE WHEN thread IS NULL THEN '' ELSE trim(
                coalesce(lag(head, 2) OVER w, '') || ' ' || coalesce(lag(head, 1) OVER w, '') || ' ' ||
                coalesce(lead(head, 1) OVER w, '') || ' ' || coalesce(lead(head, 2) OVER w, '')) END
        FROM (
            SELECT seq, text, coalesce(title, '') AS title, substr(text, 1, 200) AS head, kind, branch,
                   CASE WHEN session_id IS NOT NULL THEN 's' || session_id
                        WHEN user_id IS NOT NULL THEN 'u' || user_id END AS thread
            FROM records WHERE op = 'put' AND text != '' AND version = 1
        )
        WINDOW w AS (PARTITION BY thread, kind, branch ORDER BY seq);
        INSERT INTO records_thread_fts(rowid, text, title, context)
        SELECT r.seq, r.text, coalesce(r.title, ''), coalesce((
            SELECT f.context FROM records_thread_fts f
            WHERE f.rowid = (SELECT min(seq) FROM records WHERE id = r.id)), '')
        FROM records r WHERE r.op = 'put' AND r.text != '' AND r.version > 1;

        CREATE TRIGGER records_thread_fts_insert AFTER INSERT ON records
        WHEN new.op = 'put' AND new.text != '' BEGIN
            INSERT INTO records_thread_fts(rowid, text, title, context)
            VALUES (new.seq, new.text, coalesce(new.title, ''), CASE
                WHEN new.version > 1 THEN coalesce((
                    SELECT context FROM records_thread_fts
                    WHERE rowid = (SELECT max(seq) FROM records WHERE id = new.id AND seq < new.seq)), '')
                ELSE coalesce((
                    SELECT group_concat(substr(text, 1, 200), ' ') FROM records
                    WHERE seq IN ({_THREAD_PREVIOUS})), '')
                END);
            UPDATE records_thread_fts SET context = trim(context || ' ' || substr(new.text, 1, 200))
            WHERE new.version = 1 AND rowid IN ({_THREAD_PREVIOUS});
        END;

        CREATE TRIGGER records_thread_fts_delete AFTER DELETE ON records BEGIN
            DELETE FROM records_thread_fts WHERE rowid = old.seq;
        END;
        """,
    ),
    (
        "0004_quarantine",
        """
        -- The dead-letter table: work that failed the same way a few times is
        -- parked here with its error, so the pipeline moves on and a human can
        -- retry or drop it (`memory-anchor inbox`). stage 'capture' holds an
        -- inbox event (its row stays in inbox with status 'quarantined'),
        -- stage 'index' a record version that could not be embedded.
        CREATE TABLE quarantine (
            id              INTEGER PRIMARY KEY AUTOINCREMENT,
            stage           TEXT NOT NULL,   -- capture|index
            inbox_id        INTEGER UNIQUE,
            record_seq      INTEGER UNIQUE,
            event           TEXT,
            session_id      TEXT,
            error           TEXT NOT NULL,
            attempts        INTEGER NOT NULL,
            quarantined_at  REAL NOT NULL
        );
        -- Events an earlier version parked as 'failed' join them.
        INSERT INTO quarantine(stage, inbox_id, event, session_id, error, attempts, quarantined_at)
            SELECT 'capture', id, event, session_id, coalesce(error, 'failed'), attempts, coalesce(next_attempt, received_at)
            FROM inbox WHERE status = 'failed';
        UPDATE inbox SET status = 'quarantined' WHERE status = 'failed';
        """,
    ),
    (
        "0005_cjk_keywords",
        f"""
        -- Chinese, Japanese and Korean runs reach both keyword indexes as their
        -- bigrams and single characters (fts_words(), memory_anchor/worker/store/cjk.py; the
        -- connection registers it), so two-character words inside a sentence
        -- match. Text without CJK characters is indexed exactly as before.
        -- records_fts keeps no copy of the text: its content is now this view,
        -- so what FTS5 reads back ('rebuild', 'integrity-check') is what it indexed.
        CREATE VIEW records_fts_content AS
            SELECT seq, fts_words(text) AS text, fts_words(coalesce(title, '')) AS title
            FROM records WHERE op = 'put' AND text != '';
        DROP TRIGGER records_fts_insert;
        DROP TABLE records_fts;
        CREATE VIRTUAL TABLE records_fts USING fts5(
            text, title, content='records_fts_content', content_rowid='seq',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        INSERT INTO records_fts(records_fts) VALUES ('rebuild');
        CREATE TRIGGER records_fts_insert AFTER INSERT ON records
        WHEN new.op = 'put' AND new.text != '' BEGIN
            INSERT INTO records_fts(rowid, text, title)
            VALUES (new.seq, fts_words(new.text), fts_words(coalesce(new.title, '')));
        END;

        -- The thread index keeps its own copy; a neighbour's words are shaped
        -- as they join a record's context, so stored context is never shaped twice.
        UPDATE records_thread_fts
            SET text = fts_words(text), title = fts_words(title), context = fts_words(context)
            WHERE fts_words(text) != text OR fts_words(title) != title OR fts_words(context) != context;

        DROP TRIGGER records_thread_fts_insert;
        CREATE TRIGGER records_thread_fts_insert AFTER INSERT ON records
        WHEN new.op = 'put' AND new.text != '' BEGIN
            INSERT INTO records_thread_fts(rowid, text, title, context)
            VALUES (new.seq, fts_words(new.text), fts_words(coalesce(new.title, '')), CASE
                WHEN new.version > 1 THEN coalesce((
                    SELECT context FROM records_thread_fts
                    WHERE rowid = (SELECT max(seq) FROM records WHERE id = new.id AND seq < new.seq)), '')
                ELSE coalesce(fts_words((
                    SELECT group_concat(substr(text, 1, 200), ' ') FROM records
                    WHERE seq IN ({_THREAD_PREVIOUS}))), '')
                END);
            UPDATE records_thread_fts SET context = trim(context || ' ' || fts_words(substr(new.text, 1, 200)))
            WHERE new.version = 1 AND rowid IN ({_THREAD_PREVIOUS});
        END;
        """,
    ),
    (
        "0006_inbox_origin",
        """
        -- Where an event came from: NULL a hook, 'history' Claude Code's transcripts
        -- (memory-anchor import-history); and the route it is distilled by: NULL as the
        -- settings say, 'local' never through Claude (an import does not spend the
        -- user's Claude allowance unless asked to). A session some hook captured is
        -- not imported again, found by its session id.
        ALTER TABLE inbox ADD COLUMN origin TEXT;
        ALTER TABLE inbox ADD COLUMN route TEXT;
        CREATE INDEX inbox_by_session ON inbox(session_id);
        """,
    ),
    (
        "0007_inbox_claims",
        """
        -- The worker run that began processing a pending event, written before it begins:
        -- a run killed or hung on an event leaves its mark, and the next run counts that try
        -- (memory_anchor/worker/store/quarantine.py), so an event that kills the worker every
        -- time is quarantined after a few tries instead of being retried first forever.
        ALTER TABLE inbox ADD COLUMN claimed_by TEXT;
        """,
    ),
]

# The memory model's and the branching engine's tables follow.
MEMORY_MODEL: list[Migration] = [
    (
        "0101_memory_model",
        """
        -- Proposals waiting for a human: identity changes proposed by agents,
        -- facts of medium confidence (0.7-0.9), writes of read-only agents.
        CREATE TABLE approvals (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            kind         TEXT NOT NULL,        -- identity_change|fact|agent_write
            action       TEXT NOT NULL,        -- add|edit|remove (identity), add (fact), operation name
            status       TEXT NOT NULL DEFAULT 'pending',  -- pending|approved|rejected
            project      TEXT NOT NULL DEFAULT '',
            branch       TEXT NOT NULL DEFAULT 'main',
            agent_id     TEXT,
            session_id   TEXT,
            record_id    TEXT,                 -- the record concerned (pending fact, identity item)
            payload      TEXT NOT NULL DEFAULT '{}',
            reason       TEXT,
            created_at   REAL NOT NULL,
            decided_at   REAL,
            decided_by   TEXT,
            decision_note TEXT,
            result_id    TEXT                  -- the record the approval wrote
        );
        CREATE INDEX approvals_by_status ON approvals(status, id);

        -- Contradictions the rules could not settle: both versions are kept.
        CREATE TABLE conflicts (
            id            INTEGER PRIMARY KEY AUTOINCREMENT,
            status        TEXT NOT NULL DEFAULT 'open',  -- open|resolved
            project       TEXT NOT NULL DEFAULT '',
            branch        TEXT NOT NULL DEFAULT 'main',
            existing_id   TEXT NOT NULL,       -- the active fact
            candidate_id  TEXT NOT NULL,       -- the contradicting fact (status 'disputed')
            fact_key      TEXT,
            reason        TEXT,
            agent_id      TEXT,
            created_at    REAL NOT NULL,
            resolved_at   REAL,
            resolved_by   TEXT,
            resolution    TEXT,                -- keep_existing|keep_new|keep_both
            note          TEXT
        );
        CREATE INDEX conflicts_by_status ON conflicts(status, id);

        -- Events whose TTL ran out: archived here (and set to status 'archived'
        -- in records), restorable with `restore_event`.
        CREATE TABLE event_archive (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            record_id    TEXT NOT NULL,
            branch       TEXT NOT NULL DEFAULT 'main',
            project      TEXT NOT NULL DEFAULT '',
            agent_id     TEXT,
            text         TEXT NOT NULL,
            record       TEXT NOT NULL,        -- the archived version as JSON
            expired_at   REAL,
            archived_at  REAL NOT NULL,
            restored_at  REAL
        );
        CREATE INDEX event_archive_by_record ON event_archive(record_id);

        -- Facts proposed with confidence < 0.7: never stored as memory, logged here.
        CREATE TABLE fact_rejections (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            project      TEXT NOT NULL DEFAULT '',
            agent_id     TEXT,
            text         TEXT NOT NULL,
            confidence   REAL,
            source       TEXT,
            reason       TEXT,
            created_at   REAL NOT NULL
        );
        """,
    ),
    (
        "0102_knowledge",
        """
        -- Next steps a session left (from Claude's last message or its todo list):
        -- open until a later session's outcome says they are done.
        CREATE TABLE open_items (
            id             INTEGER PRIMARY KEY AUTOINCREMENT,
            project        TEXT NOT NULL DEFAULT '',
            branch         TEXT NOT NULL DEFAULT 'main',
            session_id     TEXT NOT NULL,
            text           TEXT NOT NULL,
            opened_at      REAL NOT NULL,
            closed_at      REAL,
            closed_by      TEXT,              -- the session whose outcome completed it
            closed_because TEXT
        );
        CREATE INDEX open_items_by_project ON open_items(project, closed_at, opened_at);
        CREATE INDEX open_items_by_session ON open_items(session_id);
        """,
    ),
    (
        "0103_forgotten",
        """
        -- What a person said is wrong: facts (rules, decisions, ...) and next steps
        -- forgotten, or the wording an edit replaced. Extraction compares what it is
        -- about to write with these, so the same words do not bring them back
        -- (memory_anchor/worker/memory/forgotten.py). Also the history of a forgotten next step.
        CREATE TABLE forgotten (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            project     TEXT NOT NULL DEFAULT '',
            kind        TEXT NOT NULL,         -- fact|next_step
            item_id     TEXT NOT NULL,         -- the fact's id, or the open item's
            text        TEXT NOT NULL,         -- the wording forgotten
            key         TEXT NOT NULL,         -- that wording normalised (memory/common.py tokens)
            action      TEXT NOT NULL,         -- forget|edit
            actor       TEXT NOT NULL,
            reason      TEXT,
            created_at  REAL NOT NULL
        );
        CREATE INDEX forgotten_by_project ON forgotten(project, kind, key);
        CREATE INDEX forgotten_by_item ON forgotten(item_id);
        """,
    ),
    (
        "0104_forgotten_on_a_branch",
        """
        -- A forget holds on the branch it was made on and on branches forked from it after
        -- `seq` (the write sequence then): forgetting on a fork leaves main as it was.
        -- Earlier rows hold as they did: on main and on every branch (seq 0).
        ALTER TABLE forgotten ADD COLUMN branch TEXT NOT NULL DEFAULT 'main';
        ALTER TABLE forgotten ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
        """,
    ),
]
BRANCHING: list[Migration] = [
    (
        "0501_merges",
        """
        -- Every merge, for the audit trail: who, when, how, what went in and what not.
        CREATE TABLE merges (
            id                 TEXT PRIMARY KEY,
            source             TEXT NOT NULL,
            target             TEXT NOT NULL,
            strategy           TEXT NOT NULL,   -- auto|cherry_pick|squash|accept|skip
            actor              TEXT,
            merged_by          TEXT NOT NULL,   -- strategy|rules|llm_judge|manual|mixed
            created_at         REAL NOT NULL,
            source_head        INTEGER,         -- source's last visible seq when merged
            target_seq_before  INTEGER,
            target_seq_after   INTEGER,
            items_merged       TEXT NOT NULL DEFAULT '[]',
            items_rejected     TEXT NOT NULL DEFAULT '[]',
            conflicts          TEXT NOT NULL DEFAULT '[]'
        );
        CREATE INDEX merges_by_source ON merges(source, created_at);
        CREATE INDEX merges_by_target ON merges(target, created_at);

        -- Which row a merge wrote as a copy of which: lets a later diff see that
        -- target's copy and source's original are the same version (no re-merge,
        -- no false conflict). origin_seq is always the first original.
        CREATE TABLE merge_copies (
            target_seq  INTEGER PRIMARY KEY,
            origin_seq  INTEGER NOT NULL,
            merge_id    TEXT NOT NULL REFERENCES merges(id)
        );
        CREATE INDEX merge_copies_by_origin ON merge_copies(origin_seq);

        -- How each session chose its branch, so an explicit switch outranks the
        -- environment, which outranks a fork branch, which outranks the default.
        CREATE TABLE session_branches (
            session_id  TEXT PRIMARY KEY,
            branch      TEXT NOT NULL,
            chosen_by   TEXT NOT NULL,   -- switch|env|fork|default
            parent_session TEXT,
            updated_at  REAL NOT NULL
        );
        CREATE INDEX session_branches_by_branch ON session_branches(branch);
        """,
    ),
]


def all_migrations() -> list[Migration]:
    return [*CORE, *MEMORY_MODEL, *BRANCHING]


def apply_migrations(conn: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded; returns the names applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
    applied = []
    for name, sql in all_migrations():
        if name in done:
            continue
        for statement in _split_sql(sql):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)", (name, time.time()))
        applied.append(name)
    return applied


def _split_sql(sql: str) -> list[str]:
    """Split a script into statements, keeping trigger bodies whole."""
    statements, current = [], ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return [s for s in statements if s.strip(" ;\n")]
