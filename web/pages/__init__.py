"""Pages: the HTML routes and their JSON twins, and the cards and diagrams a session renders."""
