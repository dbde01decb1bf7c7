"""`switchyard runner`: a daemon that asks Switchyard for runs, starts their agents, ships their logs
and reports how they ended. ARCHITECTURE.md ("The client") maps its modules."""
