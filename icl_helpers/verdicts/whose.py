"""Whose a claim is: Yu & Ananiadou's, ours or another paper's (`claims.Claim.whose`, and each finding's
"whose" in a report's JSON), and the name of each one's block of rows in a table. No torch: `compare` reads it."""
from __future__ import annotations

PAPER, OURS, LITERATURE = "paper", "ours", "literature"
BLOCKS = {PAPER: "the paper's claims", OURS: "our controls, extensions and rows", LITERATURE: "the literature's claims"}
