"""The memory pool and everything under it: `base` (what every memory is), `formats/`, `pool/`, `engine/`,
`screening/`, `lifecycle/`, `store/`."""
