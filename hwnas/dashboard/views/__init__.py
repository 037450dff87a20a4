"""The dashboard's pages, one module each (`hwnas.dashboard.app` picks one and renders it)."""
