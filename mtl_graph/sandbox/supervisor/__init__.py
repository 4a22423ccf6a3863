"""The per-sandbox supervisor: `server` is the small standard-library process that starts each command and kills
what it leaves behind; `client` is the host side that starts it and talks to it."""
