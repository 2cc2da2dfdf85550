"""Human annotation in the loop: a project's form (:mod:`.form`), its SQLite store of queues and
labels (:mod:`.store`), and the commands of ``harness annotate`` built on them."""
