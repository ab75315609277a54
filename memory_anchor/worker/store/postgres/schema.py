"""The PostgreSQL schema: tables, the write order, roles and row-level security.

Migrations are `(name, sql)`, applied in order and recorded in
`schema_migrations`, as in memory_anchor/worker/store/migrations.py; never edit one that has
shipped. Tables mirror their SQLite twins column for column, so the same store
code reads and writes both, plus:

- `author`: the role that wrote the row (`current_user`; a member cannot write
  another name, the policies check it);
- `private` on records: raw captures (prompts, observations, transcripts) are
  private to their author unless their metadata says `"private": false`;
  everything else is shared unless its metadata says `"private": true`;
- `record_terms` and `record_postings`: a record's keyword terms as SQLite's
  index holds them, and one row per (term, record) for BM25 (0007, 0009);
- `record_vectors`: a record version's embedding, so vectors outlive a worker.

The capture side (inbox, quarantine, pending vectors, the LLM budget) stays in
each developer's local SQLite: capture must keep working while the database
is away.
"""

from __future__ import annotations

import time

Migration = tuple[str, str]

MEMBER_ROLE = "memory_anchor_member"

# Every write transaction takes this transaction-level advisory lock before it
# inserts a record (`PostgresDatabase.transaction`, and the records trigger for
# any other client). Workers follow the shared log by seq ("everything after the
# last seq I saw"); with a plain sequence, a transaction could take seq 10, commit
# after another took and committed seq 11, and a follower that already read 11
# would skip 10 forever. Under the lock seqs are handed out in commit order.
WRITE_ORDER_LOCK = 0x6D656D_616E63  # "mem" "anc": any constant the database agrees on

# Kinds whose rows are private to their author unless marked otherwise.
RAW_CAPTURE_KINDS = ("prompt", "observation", "transcript")

_RAW_KINDS_SQL = ", ".join(f"'{kind}'" for kind in RAW_CAPTURE_KINDS)


def _privacy_set_by_trigger(table: str, rule: str) -> str:
    """SQL that makes `table`'s rows as private as `rule` says, whatever their writer said.

    `rule` is a boolean expression over the row's columns, each written `{row}column`
    (the trigger reads NEW.column, the backfill the column itself). Rows written before
    are backfilled as the owner, whom FORCE would otherwise keep from members' rows; a
    member then reads and decides only shared rows and their own private ones.
    """
    return _privacy_column(table, rule) + f"""
        DROP POLICY {table}_read ON {table};
        DROP POLICY {table}_decide ON {table};
        CREATE POLICY {table}_read ON {table} FOR SELECT TO {MEMBER_ROLE}
            USING (NOT private OR author = current_user);
        CREATE POLICY {table}_decide ON {table} FOR UPDATE TO {MEMBER_ROLE}
            USING (NOT private OR author = current_user);
    """


def _privacy_column(table: str, rule: str) -> str:
    """`table`'s `private` column, backfilled and then set by a trigger from `rule` (see above)."""
    return f"""
        ALTER TABLE {table} ADD COLUMN private BOOLEAN NOT NULL DEFAULT true;
        ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;
        UPDATE {table} SET private = {rule.format(row="")};
        ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
        CREATE FUNCTION {table}_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.private := {rule.format(row="NEW.")};  -- whatever the writer said
            RETURN NEW;
        END $$;
        CREATE TRIGGER {table}_before_insert BEFORE INSERT ON {table}
            FOR EACH ROW EXECUTE FUNCTION {table}_before_insert();"""

MIGRATIONS: list[Migration] = [
    (
        "0001_versioned_core",
        f"""
        DO $$ BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{MEMBER_ROLE}') THEN
                CREATE ROLE {MEMBER_ROLE} NOLOGIN;
            END IF;
        END $$;
        GRANT USAGE ON SCHEMA public TO {MEMBER_ROLE};

        CREATE TABLE branches (
            name        TEXT PRIMARY KEY,
            parent      TEXT REFERENCES branches(name),
            fork_seq    BIGINT,
            status      TEXT NOT NULL DEFAULT 'active',
            description TEXT NOT NULL DEFAULT '',
            created_at  DOUBLE PRECISION NOT NULL,
            created_by  TEXT,
            merged_at   DOUBLE PRECISION,
            archived_at DOUBLE PRECISION,
            metadata    TEXT NOT NULL DEFAULT '{{}}',
            author      TEXT NOT NULL DEFAULT current_user
        );
        INSERT INTO branches(name, parent, fork_seq, created_at, created_by, description)
        VALUES ('main', NULL, NULL, extract(epoch FROM now()), 'system', 'The default branch');

        -- The one global write sequence; the trigger below hands it out.
        CREATE SEQUENCE record_seq;

        CREATE TABLE records (
            seq          BIGINT PRIMARY KEY,
            id           TEXT NOT NULL,
            version      INTEGER NOT NULL,
            kind         TEXT NOT NULL,
            layer        TEXT,
            op           TEXT NOT NULL DEFAULT 'put' CHECK (op IN ('put', 'delete')),
            status       TEXT NOT NULL DEFAULT 'active',
            -- Deleting a branch takes its rows with it, whoever wrote them (see 'Deleting a branch').
            branch       TEXT NOT NULL DEFAULT 'main' REFERENCES branches(name) ON DELETE CASCADE,
            project      TEXT NOT NULL DEFAULT '',
            user_id      TEXT,
            agent_id     TEXT,
            run_id       TEXT,
            session_id   TEXT,
            type         TEXT,
            title        TEXT,
            text         TEXT NOT NULL DEFAULT '',
            data         TEXT NOT NULL DEFAULT '{{}}',
            metadata     TEXT NOT NULL DEFAULT '{{}}',
            confidence   DOUBLE PRECISION,
            fact_key     TEXT,
            happened_at  DOUBLE PRECISION NOT NULL,
            created_at   DOUBLE PRECISION NOT NULL,
            actor        TEXT,
            reason       TEXT,
            source_id    TEXT,
            tool_use_id  TEXT,
            content_hash TEXT,
            author       TEXT NOT NULL DEFAULT current_user,
            private      BOOLEAN NOT NULL,
            fts          tsvector GENERATED ALWAYS AS
                             (to_tsvector('simple', coalesce(title, '') || ' ' || text)) STORED
        );
        CREATE INDEX records_by_id ON records(id, seq);
        CREATE INDEX records_by_project ON records(project, kind, seq);
        CREATE INDEX records_by_session ON records(session_id, seq);
        CREATE INDEX records_by_user ON records(user_id, seq);
        CREATE INDEX records_by_branch ON records(branch, seq);
        CREATE INDEX records_by_time ON records(created_at);
        CREATE INDEX records_by_fact_key ON records(fact_key) WHERE fact_key IS NOT NULL;
        CREATE INDEX records_by_tool_use ON records(tool_use_id) WHERE tool_use_id IS NOT NULL;
        CREATE INDEX records_by_author ON records(author, seq);
        CREATE INDEX records_fts ON records USING gin(fts);

        -- Runs for every client, not only ours: the order of seqs is the
        -- database's promise (WRITE_ORDER_LOCK). `private` defaults by kind,
        -- and the metadata can say otherwise.
        CREATE FUNCTION records_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            marked jsonb;
        BEGIN
            PERFORM pg_advisory_xact_lock({WRITE_ORDER_LOCK});
            NEW.seq := nextval('record_seq');
            IF NEW.private IS NULL THEN
                BEGIN
                    marked := NEW.metadata::jsonb -> 'private';
                EXCEPTION WHEN invalid_text_representation THEN
                    marked := NULL;
                END;
                IF jsonb_typeof(marked) = 'boolean' THEN
                    NEW.private := marked::text::boolean;
                ELSE
                    NEW.private := NEW.kind IN ({_RAW_KINDS_SQL});
                END IF;
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER records_before_insert BEFORE INSERT ON records
            FOR EACH ROW EXECUTE FUNCTION records_before_insert();

        -- A record version's embedding (float32 bytes), readable when its record is.
        CREATE TABLE record_vectors (
            seq       BIGINT PRIMARY KEY REFERENCES records(seq) ON DELETE CASCADE,
            model     TEXT NOT NULL,
            embedding BYTEA NOT NULL,
            author    TEXT NOT NULL DEFAULT current_user
        );

        CREATE TABLE snapshots (
            name        TEXT PRIMARY KEY,
            branch      TEXT NOT NULL REFERENCES branches(name) ON DELETE CASCADE,
            seq         BIGINT NOT NULL,
            created_at  DOUBLE PRECISION NOT NULL,
            created_by  TEXT,
            description TEXT NOT NULL DEFAULT '',
            author      TEXT NOT NULL DEFAULT current_user
        );

        CREATE TABLE sessions (
            session_id      TEXT PRIMARY KEY,
            project         TEXT NOT NULL DEFAULT '',
            cwd             TEXT,
            branch          TEXT NOT NULL DEFAULT 'main',
            agent_id        TEXT,
            parent_session  TEXT,
            transcript_path TEXT,
            source          TEXT,
            status          TEXT NOT NULL DEFAULT 'active',
            started_at      DOUBLE PRECISION NOT NULL,
            last_seen_at    DOUBLE PRECISION NOT NULL,
            ended_at        DOUBLE PRECISION,
            end_reason      TEXT,
            prompt_count    INTEGER NOT NULL DEFAULT 0,
            tool_count      INTEGER NOT NULL DEFAULT 0,
            author          TEXT NOT NULL DEFAULT current_user
        );
        CREATE INDEX sessions_by_project ON sessions(project, started_at);
        """,
    ),
    (
        "0002_memory_model",
        """
        CREATE TABLE approvals (
            id            BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            kind          TEXT NOT NULL,
            action        TEXT NOT NULL,
            status        TEXT NOT NULL DEFAULT 'pending',
            project       TEXT NOT NULL DEFAULT '',
            branch        TEXT NOT NULL DEFAULT 'main',
            agent_id      TEXT,
            session_id    TEXT,
            record_id     TEXT,
            payload       TEXT NOT NULL DEFAULT '{}',
            reason        TEXT,
            created_at    DOUBLE PRECISION NOT NULL,
            decided_at    DOUBLE PRECISION,
            decided_by    TEXT,
            decision_note TEXT,
            result_id     TEXT,
            author        TEXT NOT NULL DEFAULT current_user
        );
        CREATE INDEX approvals_by_status ON approvals(status, id);

        CREATE TABLE conflicts (
            id            BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            status        TEXT NOT NULL DEFAULT 'open',
            project       TEXT NOT NULL DEFAULT '',
            branch        TEXT NOT NULL DEFAULT 'main',
            existing_id   TEXT NOT NULL,
            candidate_id  TEXT NOT NULL,
            fact_key      TEXT,
            reason        TEXT,
            agent_id      TEXT,
            created_at    DOUBLE PRECISION NOT NULL,
            resolved_at   DOUBLE PRECISION,
            resolved_by   TEXT,
            resolution    TEXT,
            note          TEXT,
            author        TEXT NOT NULL DEFAULT current_user
        );
        CREATE INDEX conflicts_by_status ON conflicts(status, id);

        CREATE TABLE event_archive (
            id           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            record_id    TEXT NOT NULL,
            branch       TEXT NOT NULL DEFAULT 'main',
            project      TEXT NOT NULL DEFAULT '',
            agent_id     TEXT,
            text         TEXT NOT NULL,
            record       TEXT NOT NULL,
            expired_at   DOUBLE PRECISION,
            archived_at  DOUBLE PRECISION NOT NULL,
            restored_at  DOUBLE PRECISION,
            author       TEXT NOT NULL DEFAULT current_user
        );
        CREATE INDEX event_archive_by_record ON event_archive(record_id);

        CREATE TABLE fact_rejections (
            id           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            project      TEXT NOT NULL DEFAULT '',
            agent_id     TEXT,
            text         TEXT NOT NULL,
            confidence   DOUBLE PRECISION,
            source       TEXT,
            reason       TEXT,
            created_at   DOUBLE PRECISION NOT NULL,
            author       TEXT NOT NULL DEFAULT current_user
        );

        CREATE TABLE open_items (
            id             BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            project        TEXT NOT NULL DEFAULT '',
            branch         TEXT NOT NULL DEFAULT 'main',
            session_id     TEXT NOT NULL,
            text           TEXT NOT NULL,
            opened_at      DOUBLE PRECISION NOT NULL,
            closed_at      DOUBLE PRECISION,
            closed_by      TEXT,
            closed_because TEXT,
            author         TEXT NOT NULL DEFAULT current_user
        );
        CREATE INDEX open_items_by_project ON open_items(project, closed_at, opened_at);
        CREATE INDEX open_items_by_session ON open_items(session_id);
        """,
    ),
    (
        "0003_branching",
        """
        CREATE TABLE merges (
            id                 TEXT PRIMARY KEY,
            source             TEXT NOT NULL,
            target             TEXT NOT NULL,
            strategy           TEXT NOT NULL,
            actor              TEXT,
            merged_by          TEXT NOT NULL,
            created_at         DOUBLE PRECISION NOT NULL,
            source_head        BIGINT,
            target_seq_before  BIGINT,
            target_seq_after   BIGINT,
            items_merged       TEXT NOT NULL DEFAULT '[]',
            items_rejected     TEXT NOT NULL DEFAULT '[]',
            conflicts          TEXT NOT NULL DEFAULT '[]',
            author             TEXT NOT NULL DEFAULT current_user
        );
        CREATE INDEX merges_by_source ON merges(source, created_at);
        CREATE INDEX merges_by_target ON merges(target, created_at);

        CREATE TABLE merge_copies (
            target_seq  BIGINT PRIMARY KEY REFERENCES records(seq) ON DELETE CASCADE,
            origin_seq  BIGINT NOT NULL,
            merge_id    TEXT NOT NULL REFERENCES merges(id),
            author      TEXT NOT NULL DEFAULT current_user
        );
        CREATE INDEX merge_copies_by_origin ON merge_copies(origin_seq);

        CREATE TABLE session_branches (
            session_id     TEXT PRIMARY KEY,
            branch         TEXT NOT NULL REFERENCES branches(name) ON DELETE CASCADE,
            chosen_by      TEXT NOT NULL,
            parent_session TEXT,
            updated_at     DOUBLE PRECISION NOT NULL,
            author         TEXT NOT NULL DEFAULT current_user
        );
        CREATE INDEX session_branches_by_branch ON session_branches(branch);
        """,
    ),
    (
        "0004_row_level_security",
        f"""
        -- Who may do what. Members read shared rows and their own private ones,
        -- write rows in their own name only, and change only the columns that
        -- record a decision (column grants). Records are append-only: no member
        -- may UPDATE or DELETE one; a branch's rows go when its author deletes
        -- the branch (ON DELETE CASCADE: foreign-key actions run as the table
        -- owner, so they reach rows the deleting member cannot see).
        -- FORCE makes the tables' owner obey the policies too: no policy names
        -- the owner, so it sees nothing through the tables unless it is also a
        -- member (then it is a developer like the others) or a superuser.
        GRANT SELECT ON schema_migrations TO {MEMBER_ROLE};
        GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {MEMBER_ROLE};

        GRANT SELECT, INSERT ON records TO {MEMBER_ROLE};
        CREATE POLICY records_read ON records FOR SELECT TO {MEMBER_ROLE}
            USING (NOT private OR author = current_user);
        CREATE POLICY records_write ON records FOR INSERT TO {MEMBER_ROLE}
            WITH CHECK (author = current_user);

        GRANT SELECT, INSERT ON record_vectors TO {MEMBER_ROLE};
        CREATE POLICY record_vectors_read ON record_vectors FOR SELECT TO {MEMBER_ROLE}
            USING (EXISTS (SELECT 1 FROM records r WHERE r.seq = record_vectors.seq));
        CREATE POLICY record_vectors_write ON record_vectors FOR INSERT TO {MEMBER_ROLE}
            WITH CHECK (author = current_user);

        GRANT SELECT, INSERT, DELETE ON branches TO {MEMBER_ROLE};
        GRANT UPDATE (status, description, merged_at, archived_at, metadata) ON branches TO {MEMBER_ROLE};
        CREATE POLICY branches_read ON branches FOR SELECT TO {MEMBER_ROLE} USING (true);
        CREATE POLICY branches_write ON branches FOR INSERT TO {MEMBER_ROLE}
            WITH CHECK (author = current_user);
        CREATE POLICY branches_change ON branches FOR UPDATE TO {MEMBER_ROLE} USING (true);
        CREATE POLICY branches_delete ON branches FOR DELETE TO {MEMBER_ROLE}
            USING (author = current_user AND name <> 'main');

        GRANT SELECT, INSERT, DELETE ON snapshots TO {MEMBER_ROLE};
        CREATE POLICY snapshots_read ON snapshots FOR SELECT TO {MEMBER_ROLE} USING (true);
        CREATE POLICY snapshots_write ON snapshots FOR INSERT TO {MEMBER_ROLE}
            WITH CHECK (author = current_user);
        CREATE POLICY snapshots_delete ON snapshots FOR DELETE TO {MEMBER_ROLE}
            USING (author = current_user);

        -- Sessions and their branch choices are a developer's own.
        GRANT SELECT, INSERT, UPDATE, DELETE ON sessions, session_branches TO {MEMBER_ROLE};
        CREATE POLICY sessions_own ON sessions TO {MEMBER_ROLE}
            USING (author = current_user) WITH CHECK (author = current_user);
        CREATE POLICY session_branches_own ON session_branches TO {MEMBER_ROLE}
            USING (author = current_user) WITH CHECK (author = current_user);

        -- The memory model's and the merges' tables: shared, written in one's own name.
        GRANT SELECT, INSERT ON approvals, conflicts, event_archive, fact_rejections, open_items,
            merges, merge_copies TO {MEMBER_ROLE};
        GRANT UPDATE (status, decided_at, decided_by, decision_note, result_id) ON approvals TO {MEMBER_ROLE};
        GRANT UPDATE (status, resolved_at, resolved_by, resolution, note) ON conflicts TO {MEMBER_ROLE};
        GRANT UPDATE (restored_at) ON event_archive TO {MEMBER_ROLE};
        GRANT UPDATE (closed_at, closed_by, closed_because) ON open_items TO {MEMBER_ROLE};
        -- A merge is recorded 'pending', then completed in the same transaction by whoever ran it.
        GRANT UPDATE (merged_by, target_seq_after, items_merged, items_rejected, conflicts) ON merges TO {MEMBER_ROLE};
        CREATE POLICY merges_complete ON merges FOR UPDATE TO {MEMBER_ROLE} USING (author = current_user);
        DO $$
        DECLARE
            shared text;
        BEGIN
            FOREACH shared IN ARRAY ARRAY['approvals', 'conflicts', 'event_archive', 'fact_rejections',
                                          'open_items', 'merges', 'merge_copies'] LOOP
                EXECUTE format('CREATE POLICY %I ON %I FOR SELECT TO {MEMBER_ROLE} USING (true)',
                               shared || '_read', shared);
                EXECUTE format('CREATE POLICY %I ON %I FOR INSERT TO {MEMBER_ROLE} WITH CHECK (author = current_user)',
                               shared || '_write', shared);
            END LOOP;
            FOREACH shared IN ARRAY ARRAY['approvals', 'conflicts', 'event_archive', 'open_items'] LOOP
                EXECUTE format('CREATE POLICY %I ON %I FOR UPDATE TO {MEMBER_ROLE} USING (true)',
                               shared || '_decide', shared);
            END LOOP;
        END $$;

        DO $$
        DECLARE
            guarded text;
        BEGIN
            FOREACH guarded IN ARRAY ARRAY['records', 'record_vectors', 'branches', 'snapshots', 'sessions',
                                           'session_branches', 'approvals', 'conflicts', 'event_archive',
                                           'fact_rejections', 'open_items', 'merges', 'merge_copies'] LOOP
                EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', guarded);
                EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', guarded);
            END LOOP;
        END $$;
        """,
    ),
    (
        "0005_privacy_of_the_logical_record",
        f"""
        -- A record's privacy belongs to the record, not to each version: it is decided
        -- when the record (its id) is first written, and every later version, on any
        -- branch and by anyone, carries the same flag. A version that asks otherwise
        -- (metadata "private", or the column given) is refused. With the flag fixed per
        -- id, the read policy stays a test on the row itself, and no member can see an
        -- earlier shared version as the head of a record whose newer version is private.
        -- The flag lives in record_privacy, which members cannot read: only the
        -- functions below, run as the owner, look an id up, so who wrote which private
        -- id stays out of sight.
        CREATE TABLE record_privacy (
            id      TEXT PRIMARY KEY,
            private BOOLEAN NOT NULL
        );

        -- Backfill as the owner, whom FORCE would otherwise keep from members' rows: an
        -- id with any private version is private, and its shared versions become private too.
        ALTER TABLE records NO FORCE ROW LEVEL SECURITY;
        INSERT INTO record_privacy(id, private) SELECT id, bool_or(private) FROM records GROUP BY id;
        UPDATE records r SET private = true FROM record_privacy p
            WHERE p.id = r.id AND p.private AND NOT r.private;
        ALTER TABLE records FORCE ROW LEVEL SECURITY;

        -- The privacy of record `id`: fixed by its first version (`asked`, then recorded),
        -- or NULL when `asked` is given and contradicts it.
        CREATE FUNCTION record_privacy_fix(record_id TEXT, asked BOOLEAN) RETURNS BOOLEAN
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            fixed BOOLEAN;
        BEGIN
            SELECT private INTO fixed FROM record_privacy WHERE id = record_id;
            IF NOT FOUND THEN
                INSERT INTO record_privacy(id, private) VALUES (record_id, asked);
                RETURN asked;
            END IF;
            RETURN fixed;
        END $$;
        REVOKE ALL ON FUNCTION record_privacy_fix(TEXT, BOOLEAN) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION record_privacy_fix(TEXT, BOOLEAN) TO {MEMBER_ROLE};

        -- Whether record `id` is private; an id never written counts as private.
        CREATE FUNCTION record_is_private(record_id TEXT) RETURNS BOOLEAN
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT coalesce((SELECT private FROM record_privacy WHERE id = record_id), true)
        $$;
        REVOKE ALL ON FUNCTION record_is_private(TEXT) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION record_is_private(TEXT) TO {MEMBER_ROLE};

        CREATE OR REPLACE FUNCTION records_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            marked jsonb;
            asked boolean;
            explicit boolean := NEW.private IS NOT NULL;
            fixed boolean;
        BEGIN
            PERFORM pg_advisory_xact_lock({WRITE_ORDER_LOCK});
            NEW.seq := nextval('record_seq');
            asked := NEW.private;
            IF asked IS NULL THEN
                BEGIN
                    marked := NEW.metadata::jsonb -> 'private';
                EXCEPTION WHEN invalid_text_representation THEN
                    marked := NULL;
                END;
                IF jsonb_typeof(marked) = 'boolean' THEN
                    asked := marked::text::boolean;
                    explicit := true;
                ELSE
                    asked := NEW.kind IN ({_RAW_KINDS_SQL});
                END IF;
            END IF;
            -- Under the write-order lock: two first versions of one id cannot race.
            fixed := record_privacy_fix(NEW.id, asked);
            IF explicit AND asked IS DISTINCT FROM fixed THEN
                RAISE EXCEPTION 'record % is %: a record''s privacy is fixed by its first version',
                    NEW.id, CASE WHEN fixed THEN 'private' ELSE 'shared' END
                    USING ERRCODE = 'check_violation';
            END IF;
            NEW.private := fixed;
            RETURN NEW;
        END $$;

        -- event_archive keeps an archived event's text: it is as private as the event.
        {_privacy_set_by_trigger("event_archive", "record_is_private({row}record_id)")}

        -- A session that states its next steps again withdraws its own still-open ones.
        GRANT DELETE ON open_items TO {MEMBER_ROLE};
        CREATE POLICY open_items_withdraw ON open_items FOR DELETE TO {MEMBER_ROLE}
            USING (author = current_user);
        """,
    ),
    (
        "0006_private_conflicts",
        f"""
        -- A conflict names two facts and what they are about (fact_key, reason): it is as
        -- private as the more private of the two, set by the database like event_archive's.
        {_privacy_set_by_trigger("conflicts",
                                 "record_is_private({row}existing_id) OR record_is_private({row}candidate_id)")}
        """,
    ),
    (
        "0007_keyword_terms",
        f"""
        -- A record's keyword terms as SQLite's index holds them (memory_anchor/worker/store/terms.py:
        -- FTS5's porter unicode61 tokenizer after the CJK bigrams), written by the
        -- worker with the record, ranked by BM25 in SQL (memory_anchor/worker/store/keywords.py).
        -- Positions carry term frequency; the label says the column: D text, C title,
        -- B thread context (the words of the two records before it in its thread,
        -- SQLite's records_thread_fts `context`, which there also holds the two after).
        -- `author` and `private` copy the record's, so the statistics below can be
        -- counted per reader without reading `records`.
        CREATE TABLE record_terms (
            seq            BIGINT PRIMARY KEY REFERENCES records(seq) ON DELETE CASCADE,
            terms          tsvector NOT NULL,
            length         INTEGER NOT NULL,  -- the record's own tokens (text and title)
            private        BOOLEAN NOT NULL,
            author         TEXT NOT NULL DEFAULT current_user
        );
        CREATE INDEX record_terms_search ON record_terms USING gin(terms);

        -- BM25's document frequencies and lengths, kept per (author, private) so a
        -- member's figures count only the rows they may read (the policy below): a
        -- private row's words must not show, not even as a count.
        CREATE TABLE term_stats (
            term    TEXT NOT NULL,
            author  TEXT NOT NULL,
            private BOOLEAN NOT NULL,
            docs    BIGINT NOT NULL,
            PRIMARY KEY (term, author, private)
        );
        -- Both count a record's own words (text and title), as records_fts does.
        CREATE TABLE term_totals (
            author  TEXT NOT NULL,
            private BOOLEAN NOT NULL,
            docs    BIGINT NOT NULL,
            tokens  BIGINT NOT NULL,
            PRIMARY KEY (author, private)
        );

        -- Kept by triggers running as the schema's owner (members only read them).
        -- They take the write-order lock, as every record insert does, so the
        -- counters are updated one transaction at a time (no deadlock with a
        -- branch's cascade deleting rows meanwhile).
        CREATE FUNCTION record_terms_counted() RETURNS trigger LANGUAGE plpgsql
            SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
            row record;
            delta integer;
        BEGIN
            PERFORM pg_advisory_xact_lock({WRITE_ORDER_LOCK});
            IF TG_OP = 'INSERT' THEN row := NEW; delta := 1; ELSE row := OLD; delta := -1; END IF;
            INSERT INTO term_stats AS s (term, author, private, docs)
                SELECT lexeme, row.author, row.private, delta FROM unnest(row.terms)
                WHERE weights && ARRAY['C', 'D']::text[] ORDER BY lexeme
                ON CONFLICT (term, author, private) DO UPDATE SET docs = s.docs + delta;
            INSERT INTO term_totals AS t (author, private, docs, tokens)
                VALUES (row.author, row.private, delta, delta * row.length)
                ON CONFLICT (author, private) DO UPDATE
                    SET docs = t.docs + delta, tokens = t.tokens + delta * row.length;
            RETURN NULL;
        END $$;
        CREATE TRIGGER record_terms_counted AFTER INSERT OR DELETE ON record_terms
            FOR EACH ROW EXECUTE FUNCTION record_terms_counted();

        GRANT SELECT, INSERT ON record_terms TO {MEMBER_ROLE};
        -- `private` and `author` are the record's (the write policy checks it).
        CREATE POLICY record_terms_read ON record_terms FOR SELECT TO {MEMBER_ROLE}
            USING (NOT private OR author = current_user);
        -- Written by the record's author, with the record's own privacy.
        CREATE POLICY record_terms_write ON record_terms FOR INSERT TO {MEMBER_ROLE}
            WITH CHECK (author = current_user AND EXISTS (
                SELECT 1 FROM records r WHERE r.seq = record_terms.seq
                    AND r.author = current_user AND r.private = record_terms.private));
        ALTER TABLE record_terms ENABLE ROW LEVEL SECURITY;

        -- Keyword search's way in. Under row-level security PostgreSQL evaluates the
        -- policy before any operator not marked leakproof, and `@@` is not: a member's
        -- query cannot use the GIN index and reads every row (20k rows: 7-18 ms, linear).
        -- This function, run as the owner (the table is not FORCEd, so the owner is not
        -- held by the policy), uses the index and applies the same rule itself, for the
        -- role that logged in (session_user: workers connect as their member role).
        CREATE FUNCTION record_terms_matching(query tsquery)
            RETURNS TABLE (seq BIGINT, terms tsvector, length INTEGER)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
            SELECT t.seq, t.terms, t.length FROM record_terms t
            WHERE t.terms @@ query AND (NOT t.private OR t.author = session_user)
        $$;
        REVOKE ALL ON FUNCTION record_terms_matching(tsquery) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION record_terms_matching(tsquery) TO {MEMBER_ROLE};

        -- Not FORCEd: the owner's triggers above write them.
        GRANT SELECT ON term_stats, term_totals TO {MEMBER_ROLE};
        CREATE POLICY term_stats_read ON term_stats FOR SELECT TO {MEMBER_ROLE}
            USING (NOT private OR author = current_user);
        CREATE POLICY term_totals_read ON term_totals FOR SELECT TO {MEMBER_ROLE}
            USING (NOT private OR author = current_user);
        ALTER TABLE term_stats ENABLE ROW LEVEL SECURITY;
        ALTER TABLE term_totals ENABLE ROW LEVEL SECURITY;
        """,
    ),
    (
        "0008_private_proposals_and_rejections",
        f"""
        -- A proposal quotes what it proposes (approvals.payload): a medium-confidence fact
        -- waiting for a human is as private as the fact it names; a read-only agent's write
        -- waits for its own developer (it may be anything, a private note included); an
        -- identity change is the project's, shared. Set by the database, like conflicts'.
        {_privacy_set_by_trigger("approvals", "CASE WHEN {row}record_id IS NOT NULL "
                                 "THEN record_is_private({row}record_id) ELSE {row}kind <> 'identity_change' END")}

        -- A rejected fact candidate quotes its source (a prompt, an observation, a
        -- transcript: raw captures, private by default) and is its author's diagnostics only.
        DROP POLICY fact_rejections_read ON fact_rejections;
        CREATE POLICY fact_rejections_read ON fact_rejections FOR SELECT TO {MEMBER_ROLE}
            USING (author = current_user);
        """,
    ),
    (
        "0009_keyword_postings",
        f"""
        -- BM25 as an index lookup: one row per (term, record) with the term's frequency in
        -- each column, so a query reads the postings of its own terms, not the whole term
        -- vector of every row a term matches (record_terms_matching unnested each one: 50 ms
        -- for a word in 8,000 of 100,000 records with project and user filters, 170 ms
        -- without). Read under the members' policy itself: `=` on text is leakproof, so the
        -- index serves a member, where `@@` on the term vector needed a function run as the
        -- owner to reach its GIN index. `own`: the term is in the record's text or title,
        -- not only in its thread context (label B); a word common enough to be matched in
        -- records' own words only reads these postings alone. `opens`: the record's text
        -- starts with it (a transcript's speaker). The INCLUDE columns let a scan answer
        -- from the index.
        CREATE TABLE record_postings (
            term       TEXT NOT NULL,
            own        BOOLEAN NOT NULL,
            seq        BIGINT NOT NULL,
            text_tf    SMALLINT NOT NULL,
            title_tf   SMALLINT NOT NULL,
            context_tf SMALLINT NOT NULL,
            opens      BOOLEAN NOT NULL,
            length     INTEGER NOT NULL,
            private    BOOLEAN NOT NULL,
            author     TEXT NOT NULL
        );

        -- A record's postings, from its term vector (record_terms is their source: the
        -- worker writes it, the trigger below derives the postings as the owner).
        CREATE FUNCTION record_postings_of(indexed record_terms)
            RETURNS TABLE (term TEXT, own BOOLEAN, text_tf SMALLINT, title_tf SMALLINT, context_tf SMALLINT, opens BOOLEAN)
            LANGUAGE sql IMMUTABLE AS $$
            SELECT u.lexeme, u.weights && ARRAY['C', 'D']::text[],
                   cardinality(array_positions(u.weights, 'D'))::smallint,
                   cardinality(array_positions(u.weights, 'C'))::smallint,
                   cardinality(array_positions(u.weights, 'B'))::smallint,
                   coalesce(u.weights[array_position(u.positions, 1::smallint)] = 'D', false)
            FROM unnest(indexed.terms) AS u(lexeme, positions, weights)
        $$;

        INSERT INTO record_postings
            SELECT p.term, p.own, t.seq, p.text_tf, p.title_tf, p.context_tf, p.opens, t.length, t.private, t.author
            FROM record_terms t, record_postings_of(t) p;
        ALTER TABLE record_postings ADD PRIMARY KEY (term, own, seq)
            INCLUDE (text_tf, title_tf, context_tf, opens, length, private, author);

        -- Written with the term vector and deleted with it (a deleted branch's rows), by
        -- their full key; run as the owner, like the statistics' trigger (0007).
        CREATE FUNCTION record_terms_posted() RETURNS trigger LANGUAGE plpgsql
            SECURITY DEFINER SET search_path = public, pg_temp AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO record_postings
                    SELECT p.term, p.own, NEW.seq, p.text_tf, p.title_tf, p.context_tf, p.opens,
                           NEW.length, NEW.private, NEW.author
                    FROM record_postings_of(NEW) p;
            ELSE
                DELETE FROM record_postings r USING record_postings_of(OLD) p
                    WHERE r.term = p.term AND r.own = p.own AND r.seq = OLD.seq;
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER record_terms_posted AFTER INSERT OR DELETE ON record_terms
            FOR EACH ROW EXECUTE FUNCTION record_terms_posted();

        -- Not FORCEd: the owner's trigger writes it. Members read what they may read.
        GRANT SELECT ON record_postings TO {MEMBER_ROLE};
        CREATE POLICY record_postings_read ON record_postings FOR SELECT TO {MEMBER_ROLE}
            USING (NOT private OR author = current_user);
        ALTER TABLE record_postings ENABLE ROW LEVEL SECURITY;

        -- The postings replace the GIN index and its way in under row-level security.
        DROP FUNCTION record_terms_matching(tsquery);
        DROP INDEX record_terms_search;
        """,
    ),
    (
        "0010_records_without_fts",
        """
        -- The text as PostgreSQL's own tsvector (0001) has had no reader since keyword search
        -- moved to the terms SQLite's index holds (0007): every insert still computed it and
        -- added it to a GIN index, and every `SELECT *` of records carried it.
        ALTER TABLE records DROP COLUMN fts;
        """,
    ),
    (
        "0011_forgotten",
        f"""
        -- What a person said is wrong (SQLite's 0103_forgotten): facts and next steps
        -- forgotten, the wording an edit replaced. Written in one's own name and never
        -- changed (no UPDATE or DELETE grant). A forgotten fact's wording is as private
        -- as the fact; a next step is the project's (open_items are shared), so is its row.
        CREATE TABLE forgotten (
            id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            project     TEXT NOT NULL DEFAULT '',
            kind        TEXT NOT NULL,
            item_id     TEXT NOT NULL,
            text        TEXT NOT NULL,
            key         TEXT NOT NULL,
            action      TEXT NOT NULL,
            actor       TEXT NOT NULL,
            reason      TEXT,
            created_at  DOUBLE PRECISION NOT NULL,
            author      TEXT NOT NULL DEFAULT current_user
        );
        CREATE INDEX forgotten_by_project ON forgotten(project, kind, key);
        CREATE INDEX forgotten_by_item ON forgotten(item_id);
        GRANT SELECT, INSERT ON forgotten TO {MEMBER_ROLE};
        ALTER TABLE forgotten ENABLE ROW LEVEL SECURITY;
        ALTER TABLE forgotten FORCE ROW LEVEL SECURITY;
        {_privacy_column("forgotten", "{row}kind = 'fact' AND record_is_private({row}item_id)")}
        CREATE POLICY forgotten_read ON forgotten FOR SELECT TO {MEMBER_ROLE}
            USING (NOT private OR author = current_user);
        CREATE POLICY forgotten_write ON forgotten FOR INSERT TO {MEMBER_ROLE}
            WITH CHECK (author = current_user);
        """,
    ),
    (
        "0012_forgotten_on_a_branch",
        """
        -- SQLite's 0104: a forget holds on its branch and on branches forked from it after `seq`.
        ALTER TABLE forgotten ADD COLUMN branch TEXT NOT NULL DEFAULT 'main';
        ALTER TABLE forgotten ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
        """,
    ),
]

# Two `storage init` runs at once must not both apply a migration.
_MIGRATION_LOCK = WRITE_ORDER_LOCK + 1


def apply_schema(conn, migrations: list[Migration] = MIGRATIONS) -> list[str]:
    """Apply every migration not yet recorded, in one transaction; returns the names applied.

    `conn` is a psycopg connection of the database owner, outside a transaction.
    PostgreSQL's DDL is transactional: an upgrade applies whole or not at all.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
        done = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
        applied = []
        for name, sql in migrations:
            if name in done:
                continue
            conn.execute(sql)
            conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (%s, %s)", (name, time.time()))
            applied.append(name)
    return applied


def applied_migrations(conn) -> list[str]:
    """The migrations this database has, in order; empty before `storage init`."""
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()[0]
    if not exists:
        return []
    return [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]

