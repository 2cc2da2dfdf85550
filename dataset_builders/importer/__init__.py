"""The generic importer (builder ``import``): any benchmark's CSV / JSONL / JSON / Parquet / Hub
files into the common schema through a YAML column mapping (:mod:`~dataset_builders.importer.mapping`;
shipped mappings in ``mappings/``)."""
