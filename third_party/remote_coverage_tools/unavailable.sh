#!/bin/sh
echo "coverage is not available in ferry's offline build" >&2
exit 1
