"""MEDAL human annotation (§5.2, App. E.1): blind sheets out, filled files back in
(:mod:`~dataset_builders.medal_pipeline.annotation.sheets`), inter-annotator agreement
(:mod:`~dataset_builders.medal_pipeline.annotation.agreement`)."""
