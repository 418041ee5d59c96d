"""Columns managed in SQL: the full-text fallback and the change watermark.

``txid`` holds the xid8 of the transaction that last wrote the row. A cache that remembers
``pg_snapshot_xmin(pg_current_snapshot())`` at its last sync and then reads rows with
``txid >= that xmin`` sees every row committed since, including ones from transactions that were
still open during the previous sync — no per-org write lock is needed for coherence.
"""

from django.db import migrations

SQL = """
ALTER TABLE memory_node ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('english', coalesce(speaker, '') || ' ' || coalesce(text, ''))) STORED;
CREATE INDEX node_search_gin ON memory_node USING gin (search);

CREATE OR REPLACE FUNCTION nylon_stamp_txid() RETURNS trigger AS $$
BEGIN
    NEW.txid := pg_current_xact_id();
    RETURN NEW;
END $$ LANGUAGE plpgsql;

ALTER TABLE memory_node ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
ALTER TABLE memory_edge ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE TRIGGER node_stamp_txid BEFORE UPDATE ON memory_node FOR EACH ROW EXECUTE FUNCTION nylon_stamp_txid();
CREATE TRIGGER edge_stamp_txid BEFORE UPDATE ON memory_edge FOR EACH ROW EXECUTE FUNCTION nylon_stamp_txid();
CREATE INDEX node_org_txid ON memory_node (org_id, txid);
CREATE INDEX edge_org_txid ON memory_edge (org_id, txid);
"""

REVERSE = """
DROP INDEX IF EXISTS edge_org_txid; DROP INDEX IF EXISTS node_org_txid;
DROP TRIGGER IF EXISTS edge_stamp_txid ON memory_edge; DROP TRIGGER IF EXISTS node_stamp_txid ON memory_node;
ALTER TABLE memory_edge DROP COLUMN txid; ALTER TABLE memory_node DROP COLUMN txid;
DROP FUNCTION IF EXISTS nylon_stamp_txid();
DROP INDEX IF EXISTS node_search_gin; ALTER TABLE memory_node DROP COLUMN search;
"""


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_initial")]
    operations = [migrations.RunSQL(SQL, REVERSE)]
