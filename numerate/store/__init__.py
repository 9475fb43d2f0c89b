"""The results database: the one gateway to it (no SQL is written outside this package).

- `rows`: a typed row per table the pipeline writes; the column lists derive from them;
- `queries`: every named read, with typed results, over one `Source` protocol (a `Store` or
  a `Reader`);
- `schema`, `migrations`: the tables, their columns and their versioned history;
- `access`: holding the DuckDB file for a moment, waiting (bounded, visibly) while another
  process has it;
- `journal`: rows a process received and has not written yet, on disk at once;
- `writer`, `tables`: `Store`, its short sessions, and every write;
- `reader`: `Reader`, read-only access for reports and analysts;
- `shards`: Parquet shards of runs made on other machines, and their ingest.

Many processes use one database at once: see docs/sharing.md, "Many users, one database".
"""

from numerate.store.access import DatabaseBusy
from numerate.store.reader import existing_database
from numerate.store.schema import StoreError, StoreFailedForNow, now
from numerate.store.writer import Store

__all__ = ["DatabaseBusy", "Store", "StoreError", "StoreFailedForNow", "existing_database", "now"]
