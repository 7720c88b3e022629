"""Views computed from plans and live reads: the cost/fit diff between two configs, drift
between recorded, live and planned (the status view), preview's live warnings, and the price
comparison. Pure: reports render these and only these."""
