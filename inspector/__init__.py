"""Stream Inspector: Django project package and the app that holds its commands."""
