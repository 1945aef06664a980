from wirelessfl.cli import run

run()
