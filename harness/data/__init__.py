"""Datasets in the core: the common record schema (:mod:`~harness.data.schema`), the on-disk layout
of a built dataset (:mod:`~harness.data.layout`), the builder registry that ``dataset_builders``
plugs into (:mod:`~harness.data.builders`), the local versioned registry
(:mod:`~harness.data.registry`), Hub publishing (:mod:`~harness.data.hub`) and resolving/loading
a task's data for a run (:mod:`~harness.data.resolve`)."""
