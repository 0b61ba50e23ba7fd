"""Great Expectations suites (JSON, reviewed like code) and the code that runs them as gates.

The gates arrive with their own issue; the spine's commit step is where they will run,
between the staged version and the catalog row.
"""
