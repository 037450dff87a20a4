"""`python -m hwnas.devices.agent --host H --port P --token-file F`: run an agent."""

from hwnas.devices.agent.server import main

main()
