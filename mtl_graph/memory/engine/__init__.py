"""The Qdrant engines under the pool: the storage protocol, Qdrant Edge and qdrant-client, opening a location,
integrity checks, snapshots, namespaces and the bundled embedding model."""
