print('train')
