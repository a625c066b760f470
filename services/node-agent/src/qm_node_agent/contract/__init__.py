"""The SageMaker training-job contract, one home for both runtimes.

`spec` reads what an attempt's part needs (pure), `stage` makes /opt/ml before the
entrypoint starts (config files, /etc/hosts, channels from S3 or the host), `outputs`
collects the failure file and uploads the model and output data once it ends.
"""

from qm_node_agent.contract.spec import Channel, Contract, Outputs, build_contract

__all__ = ["Channel", "Contract", "Outputs", "build_contract"]
