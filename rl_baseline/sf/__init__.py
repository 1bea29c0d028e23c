"""sample-factory glue: configuration (``cfg``), environments (``env``), training (``train``), evaluation (``evaluate``)."""
