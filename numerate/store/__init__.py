"""The results database: one home for every read and write of it.

- `schema`, `migrations`: the tables, their columns and their versioned history;
- `access`: holding the DuckDB file for a moment, waiting (bounded, visibly) while another
  process has it;
- `journal`: rows a process received and has not written yet, on disk at once;
- `writer`: `Store`, every write, in short sessions;
- `reader`: `Reader`, read-only access for reports and analysts;
- `shards`: Parquet shards of runs made on other machines, and their ingest.

Many processes use one database at once: see the README, "Many users, one database".
"""

from numerate.store.access import DatabaseBusy
from numerate.store.schema import StoreError, now
from numerate.store.writer import Store

__all__ = ["DatabaseBusy", "Store", "StoreError", "now"]
