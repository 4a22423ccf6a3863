"""Write-time screening: memories that read like instructions to misbehave are flagged, never retrieved."""
