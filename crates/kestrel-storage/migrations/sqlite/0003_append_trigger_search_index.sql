-- One-statement appends that write few pages, and a trigram index for text search.

-- Appends write as few pages as possible. A thread's next seq is one past the larger of its last
-- message's seq and `next_seq`, which now only moves on deletes (so seqs are never reused) and
-- in the transactional append path. An append touches the thread's `updated_at` (and its two
-- indexes) only when it is a second or more behind: a busy thread's row is not rewritten by
-- every append.
CREATE TRIGGER messages_touch_thread AFTER INSERT ON messages
WHEN NEW.created_at >= (SELECT updated_at FROM threads WHERE id = NEW.thread_id) + 1000000
BEGIN
    UPDATE threads SET updated_at = NEW.created_at WHERE id = NEW.thread_id;
END;

CREATE TRIGGER messages_keep_next_seq AFTER DELETE ON messages
BEGIN
    UPDATE threads SET next_seq = OLD.seq + 1
    WHERE id = OLD.thread_id AND next_seq <= OLD.seq;
END;

-- Trigram index of `search_text` (already lowercased, hence `case_sensitive 1`), used by
-- `search_messages` for needles with a run of three characters or more, through GLOB.
-- `detail=none, columnsize=0` keep it small: it only narrows candidates, and every candidate is
-- checked against the text itself. Messages without text (tool calls, tool results) are not
-- indexed.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    search_text,
    content = 'messages',
    content_rowid = 'rowid',
    tokenize = 'trigram case_sensitive 1',
    detail = none,
    columnsize = 0
);

-- The index is brought up to date in batches, not by every append: FTS5 writes a new segment
-- per transaction, which would more than double the pages an append writes. Messages whose rowid
-- is at most `indexed_up_to` are in `messages_fts`; newer ones (a few hundred at most, see
-- `SqliteStorage`) are scanned by every search.
CREATE TABLE search_index_state (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_up_to INTEGER NOT NULL
) STRICT;

INSERT INTO messages_fts (rowid, search_text)
SELECT rowid, search_text FROM messages WHERE search_text <> '';

INSERT INTO search_index_state (id, indexed_up_to)
SELECT 1, coalesce(max(rowid), 0) FROM messages;

-- Below the mark, the index follows every change. SQLite reuses the largest rowid after that row
-- is deleted, so an insert can land below the mark too; it is indexed at once.
CREATE TRIGGER messages_fts_insert_below_mark AFTER INSERT ON messages
WHEN NEW.search_text <> '' AND NEW.rowid <= (SELECT indexed_up_to FROM search_index_state)
BEGIN
    INSERT INTO messages_fts (rowid, search_text) VALUES (NEW.rowid, NEW.search_text);
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN OLD.search_text <> '' AND OLD.rowid <= (SELECT indexed_up_to FROM search_index_state)
BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, search_text)
    VALUES ('delete', OLD.rowid, OLD.search_text);
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF search_text ON messages
WHEN OLD.search_text IS NOT NEW.search_text
    AND OLD.rowid <= (SELECT indexed_up_to FROM search_index_state)
BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, search_text)
    SELECT 'delete', OLD.rowid, OLD.search_text WHERE OLD.search_text <> '';
    INSERT INTO messages_fts (rowid, search_text)
    SELECT NEW.rowid, NEW.search_text WHERE NEW.search_text <> '';
END;
