"""MEDAL human annotation (§5.2, App. E.1): blind sheets out
(:mod:`~dataset_builders.medal_pipeline.annotation.sheets`), filled files back in
(:mod:`~dataset_builders.medal_pipeline.annotation.imports`), inter-annotator agreement
(:mod:`~dataset_builders.medal_pipeline.annotation.agreement`)."""
