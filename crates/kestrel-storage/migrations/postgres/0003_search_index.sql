-- A trigram index for `search_messages`, when the server offers pg_trgm (a trusted extension
-- since PostgreSQL 13, so a database owner may create it). The extension goes to `public`
-- (which every Kestrel connection has on its search_path) unless it is already installed
-- elsewhere. When it cannot be created nothing else changes: searches then scan the messages of
-- the scope, as before.
DO $$
DECLARE
    trgm_schema text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm')
       AND EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public;
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'kestrel: pg_trgm could not be created (%); text search will scan', SQLERRM;
        END;
    END IF;
    SELECT n.nspname INTO trgm_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'pg_trgm';
    IF trgm_schema IS NOT NULL THEN
        EXECUTE format(
            'CREATE INDEX messages_search_trgm ON messages USING gin (search_text %I.gin_trgm_ops)',
            trgm_schema
        );
    END IF;
END
$$;
