CREATE DATABASE {name} TEMPLATE {template};
