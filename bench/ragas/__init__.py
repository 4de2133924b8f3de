"""Against RAGAS: the scripts that compare, and those run inside bench/.ragas-venv."""
