# Slurm scenario (placeholder until written).
slurm_down() { :; }
