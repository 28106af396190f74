"""Built-in plugin: the robust joint classifier-discriminator refiner. Under construction."""
